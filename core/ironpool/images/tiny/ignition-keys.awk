# Prints the sshAuthorizedKeys of the Ignition user "root" (passwd.users[].sshAuthorizedKeys), one
# per line. A small JSON reader for busybox awk: tokens first, then recursive descent by path.
BEGIN { RS = "\001" }
{ text = text $0 }
END {
  n = 0; i = 1; len = length(text)
  while (i <= len) {
    c = substr(text, i, 1)
    if (c == " " || c == "\t" || c == "\n" || c == "\r") { i++; continue }
    if (c == "\"") {
      j = i + 1; str = ""
      while (j <= len) {
        ch = substr(text, j, 1)
        if (ch == "\\") { nx = substr(text, j + 1, 1); str = str (nx == "n" ? "\n" : nx); j += 2; continue }
        if (ch == "\"") break
        str = str ch; j++
      }
      tok[++n] = "s" str; i = j + 1; continue
    }
    if (index("{}[]:,", c)) { tok[++n] = c; i++; continue }
    j = i
    while (j <= len && !index(" \t\r\n{}[]:,", substr(text, j, 1))) j++
    tok[++n] = "l" substr(text, i, j - i); i = j
  }
  p = 1
  if (n) value("")
  for (u in uname) if (uname[u] == "root" && (u in ukeys)) printf "%s", ukeys[u]
}
function value(path,    t, k, idx) {
  t = tok[p]
  if (t == "{") {
    p++
    while (p <= n && tok[p] != "}") {
      k = substr(tok[p], 2); p += 2
      value(path "/" k)
      if (tok[p] == ",") p++
    }
    p++; return
  }
  if (t == "[") {
    p++; idx = 0
    while (p <= n && tok[p] != "]") {
      value(path "/" idx++)
      if (tok[p] == ",") p++
    }
    p++; return
  }
  p++
  if (path ~ /^\/passwd\/users\/[0-9]+\/name$/) { split(path, a, "/"); uname[a[4]] = substr(t, 2) }
  if (path ~ /^\/passwd\/users\/[0-9]+\/sshAuthorizedKeys\/[0-9]+$/) {
    split(path, a, "/"); ukeys[a[4]] = ukeys[a[4]] substr(t, 2) "\n"
  }
}
