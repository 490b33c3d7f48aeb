#!/usr/bin/env bash
# Refresh the web console's terminal emulator, xterm.js (MIT), from the npm registry: the built files
# and their licence are committed under core/ironpool/apiserver/ui/static/ so the package ships them
# and the console works offline. Run by hand when moving to another version; checks the tarball's hash.
set -euo pipefail
VERSION=5.5.0
SHA256=bd954fa721872170188cc5d7e83e88db3c83c9a18a4e8d24c2783d26491f59d2
cd "$(dirname "$0")/.."
dest=core/ironpool/apiserver/ui/static
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@xterm/xterm@$VERSION" >/dev/null)
echo "$SHA256  $tmp/xterm-xterm-$VERSION.tgz" | sha256sum -c --quiet
tar -xzf "$tmp/xterm-xterm-$VERSION.tgz" -C "$tmp"
# The source map is not shipped: drop the line that points at it.
sed '/^\/\/# sourceMappingURL=/d' "$tmp/package/lib/xterm.js" >"$dest/xterm.js"
cp "$tmp/package/css/xterm.css" "$dest/xterm.css"
cp "$tmp/package/LICENSE" "$dest/xterm-LICENSE.txt"
echo "xterm.js $VERSION in $dest"
