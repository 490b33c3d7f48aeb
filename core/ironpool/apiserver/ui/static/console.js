/* A Machine's serial console in the browser: xterm.js over the machines/exec websocket, speaking
 * Kubernetes' channel protocol (v5.channel.k8s.io, v4): keys go on stdin (channel 0), what the guest
 * prints comes on stdout (1), starting with its recent serial log (the boot), the session's end as a
 * Status on channel 3. A browser cannot set an
 * Authorization header on a websocket, so the token travels as the subprotocol
 * base64url.bearer.authorization.k8s.io.<token>, as the kube-apiserver accepts it. */
"use strict";
IP.pages.console = async function (main, [namespace, name]) {
  main.innerHTML = `
    <h1>Console of <a href="#/machine/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}">${IP.esc(namespace)}/${IP.esc(name)}</a></h1>
    <p class="muted">The Machine's serial console. What you type goes to the guest. <span id="console-state">Connecting…</span></p>
    <div id="console-error" class="error" hidden></div>
    <div class="terminal" id="terminal"></div>`;
  const $ = (s) => main.querySelector(s);
  const say = (text) => { $("#console-state").textContent = text; };
  const fail = (text) => { $("#console-error").textContent = text; $("#console-error").hidden = !text; };
  await IP.loadScript("/ui/xterm.js");
  const term = new Terminal({ convertEol: false, cursorBlink: true, scrollback: 5000, fontSize: 14 });
  term.open($("#terminal"));
  IP.consoleText = ""; // what the guest printed, for whoever reads the page's state (tests)
  const encoder = new TextEncoder(), decoder = new TextDecoder();

  const protocols = ["v5.channel.k8s.io", "v4.channel.k8s.io"];
  if (IP.token()) {
    const b64 = btoa(String.fromCharCode(...encoder.encode(IP.token()))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    protocols.push("base64url.bearer.authorization.k8s.io." + b64);
  }
  // history=true: the console's recent output (the boot log) first, then what comes live.
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${IP.path(IP.COMPUTE, "machines", namespace, name)}/exec?history=true`;
  const ws = new WebSocket(url, protocols);
  ws.binaryType = "arraybuffer";
  let opened = false, ended = false;
  ws.onopen = () => { opened = true; say(`Connected (${ws.protocol}).`); term.focus(); };
  ws.onmessage = (ev) => {
    const data = new Uint8Array(ev.data);
    if (!data.length) return;
    const payload = data.subarray(1);
    if (data[0] === 1 || data[0] === 2) {
      term.write(payload);
      IP.consoleText += decoder.decode(payload, { stream: true });
    } else if (data[0] === 3) {
      ended = true;
      let status = {};
      try { status = JSON.parse(decoder.decode(payload)); } catch (e) { /* not JSON */ }
      say(status.status === "Success" ? "The console session ended." : "The console session ended: " + (status.message || "failure"));
    }
  };
  ws.onclose = async () => {
    if (opened) { if (!ended) say("Disconnected."); return; }
    // The browser does not show why an upgrade was refused: ask the server what it would say.
    let why = "the server refused the console";
    try {
      const m = await IP.get(IP.path(IP.COMPUTE, "machines", namespace, name));
      const allowed = await IP.can("create", IP.COMPUTE, "machines", namespace, name, "exec");
      if (!allowed) why = "your role does not allow opening consoles (create machines/exec)";
      else if (!(m.spec && m.spec.machinePoolRef)) why = "the Machine is not placed on a pool yet";
      else if ((m.status && m.status.state) !== "Running") why = `the Machine is ${(m.status && m.status.state) || "Pending"}, not Running`;
    } catch (e) { why = e.message; }
    say("Not connected.");
    fail("The console could not be opened: " + why + ".");
  };
  const input = term.onData((d) => {
    if (ws.readyState === WebSocket.OPEN) {
      const bytes = encoder.encode(d), msg = new Uint8Array(bytes.length + 1);
      msg.set(bytes, 1); // channel 0: stdin
      ws.send(msg);
    }
  });
  return () => {
    input.dispose();
    if (ws.readyState === WebSocket.OPEN && ws.protocol === "v5.channel.k8s.io") ws.send(new Uint8Array([255, 0])); // v5: close stdin, the server ends the session
    ws.close();
    term.dispose();
  };
};
