/* One Machine: its facts, conditions, NICs, volumes and Events, live; and the actions the user's role
 * allows (asked of the server with SelfSubjectAccessReviews; the server checks again on the request). */
"use strict";
IP.pages.machine = async function (main, [namespace, name]) {
  const path = IP.path(IP.COMPUTE, "machines", namespace, name);
  main.innerHTML = `
    <h1>Machine ${IP.esc(namespace)}/${IP.esc(name)}</h1>
    <div id="machine-error" class="error" hidden></div>
    <div class="actions" id="actions"></div>
    <div class="card"><dl class="facts" id="facts"><dt>Loading…</dt><dd></dd></dl></div>
    <h2>Conditions</h2><table id="conditions">${IP.CONDITIONS_HEAD}<tbody></tbody></table>
    <h2>Network interfaces</h2><table id="nics"><thead><tr><th>Name</th><th>Network interface</th><th>State</th><th>Addresses</th></tr></thead><tbody></tbody></table>
    <h2>Volumes</h2><table id="volumes"><thead><tr><th>Name</th><th>Source</th><th>State</th></tr></thead><tbody></tbody></table>
    <h2>Events</h2><table id="events">${IP.EVENTS_HEAD}<tbody></tbody></table>`;
  const $ = (s) => main.querySelector(s);
  const fail = (msg) => { $("#machine-error").textContent = msg; $("#machine-error").hidden = !msg; };
  const may = {};
  [may.patch, may.remove, may.exec] = await Promise.all([
    IP.can("patch", IP.COMPUTE, "machines", namespace, name),
    IP.can("delete", IP.COMPUTE, "machines", namespace, name),
    IP.can("create", IP.COMPUTE, "machines", namespace, name, "exec"),
  ]);
  let machine = null;
  let confirmDelete = false;

  function actions() {
    const m = machine;
    if (!m) return;
    const power = (m.spec && m.spec.power) || "On";
    const parts = [];
    if (may.patch) parts.push(power === "Off"
      ? `<button id="power-on" class="primary">Power on</button>`
      : `<button id="power-off">Power off</button>`);
    if (may.exec) parts.push(`<a href="#/console/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}"><button id="open-console">Console</button></a>`);
    if (may.remove) parts.push(confirmDelete ? `<button id="delete-confirm" class="danger">Really delete ${IP.esc(name)}</button> <button id="delete-cancel">Keep it</button>` : `<button id="delete">Delete</button>`);
    if (!parts.length) parts.push('<span class="muted">Your role allows no actions on this Machine.</span>');
    $("#actions").innerHTML = parts.join(" ");
  }

  async function act(fn) {
    fail("");
    try { await fn(); } catch (e) { fail(e.message); }
  }
  $("#actions").addEventListener("click", (ev) => {
    const id = ev.target.id;
    if (id === "power-off" || id === "power-on") {
      act(() => IP.request("PATCH", path, { spec: { power: id === "power-on" ? "On" : "Off" } }, "application/merge-patch+json"));
    } else if (id === "delete") { confirmDelete = true; actions(); }
    else if (id === "delete-cancel") { confirmDelete = false; actions(); }
    else if (id === "delete-confirm") { confirmDelete = false; act(() => IP.request("DELETE", path)); }
  });

  function render() {
    const m = machine, s = m.status || {}, sp = m.spec || {};
    const state = m.metadata.deletionTimestamp ? "Terminating" : s.state || "Pending";
    const labels = Object.entries(m.metadata.labels || {}).map(([k, v]) => `<span class="tag">${IP.esc(k)}=${IP.esc(v)}</span>`).join("") || '<span class="muted">none</span>';
    $("#facts").innerHTML = `
      <dt>State</dt><dd id="machine-state">${IP.state(state)}</dd>
      <dt>Power</dt><dd id="machine-power">${IP.state(sp.power || "On")}</dd>
      <dt>Pool</dt><dd>${sp.machinePoolRef ? IP.esc(sp.machinePoolRef.name) : '<span class="muted">not placed yet</span>'}</dd>
      <dt>Class</dt><dd>${IP.esc(sp.machineClassRef && sp.machineClassRef.name)}</dd>
      <dt>Addresses</dt><dd id="machine-addresses">${IP.esc(IP.addresses(m).join(", ")) || '<span class="muted">none</span>'}</dd>
      <dt>Image</dt><dd>${IP.esc(s.imageRef || sp.image || "")}</dd>
      <dt>Machine ID</dt><dd>${IP.esc(s.machineID || "")}</dd>
      <dt>Labels</dt><dd>${labels}</dd>
      <dt>Age</dt><dd>${IP.age(m.metadata.creationTimestamp)}</dd>`;
    $("#conditions tbody").innerHTML = IP.conditionRows(s.conditions);
    const nicStatus = new Map((s.networkInterfaces || []).map((n) => [n.name, n]));
    $("#nics tbody").innerHTML = (sp.networkInterfaces || []).map((n) => {
      const st = nicStatus.get(n.name) || {};
      const ref = n.networkInterfaceRef ? n.networkInterfaceRef.name : n.ephemeral ? "(ephemeral)" : "";
      return `<tr><td>${IP.esc(n.name)}</td><td>${IP.esc(ref)}</td><td>${IP.state(st.state || "Pending")}</td><td>${IP.esc((st.ips || []).join(", "))}</td></tr>`;
    }).join("") || '<tr><td colspan="4" class="muted">none</td></tr>';
    const volStatus = new Map((s.volumes || []).map((v) => [v.name, v]));
    $("#volumes tbody").innerHTML = (sp.volumes || []).map((v) => {
      const src = v.volumeRef ? `Volume <a href="#/volume/${encodeURIComponent(namespace)}/${encodeURIComponent(v.volumeRef.name)}">${IP.esc(v.volumeRef.name)}</a>`
        : IP.esc(v.localDisk ? `local disk ${v.localDisk.image || ""} ${v.localDisk.sizeLimit || ""}` : v.emptyDisk ? "empty disk" : v.ephemeral ? "ephemeral Volume" : "");
      return `<tr><td>${IP.esc(v.name)}</td><td>${src}</td><td>${IP.state((volStatus.get(v.name) || {}).state || "Pending")}</td></tr>`;
    }).join("") || '<tr><td colspan="3" class="muted">none</td></tr>';
    actions();
  }

  const stops = [
    IP.informer(IP.path(IP.COMPUTE, "machines", namespace), { fieldSelector: "metadata.name=" + name }, {
      sync(items) {
        if (!items.length) { fail(`Machine ${namespace}/${name} does not exist (or no longer).`); return; }
        machine = items[0]; fail(""); render();
      },
      event(type, o) {
        if (type === "DELETED") { fail(`Machine ${namespace}/${name} was deleted.`); $("#actions").innerHTML = ""; return; }
        machine = o; render();
      },
      error(err) { fail(err.message); },
    }),
    IP.eventsOf(namespace, "Machine", name, $("#events tbody")),
  ];
  return () => stops.forEach((s) => s());
};
