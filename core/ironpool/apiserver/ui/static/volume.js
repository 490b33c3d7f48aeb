/* One Volume: its state, size, pool, class, the Machine that claims it and the domain it is attached
 * to, conditions and Events, live; a delete action when the user's role allows it (asked of the server
 * with a SelfSubjectAccessReview; the server checks again on the request). */
"use strict";
IP.pages.volume = async function (main, [namespace, name]) {
  const path = IP.path(IP.STORAGE, "volumes", namespace, name);
  main.innerHTML = `
    <h1>Volume ${IP.esc(namespace)}/${IP.esc(name)}</h1>
    <div id="volume-error" class="error" hidden></div>
    <div class="actions" id="actions"></div>
    <div class="card"><dl class="facts" id="facts"><dt>Loading…</dt><dd></dd></dl></div>
    <h2>Conditions</h2><table id="conditions">${IP.CONDITIONS_HEAD}<tbody></tbody></table>
    <h2>Events</h2><table id="events">${IP.EVENTS_HEAD}<tbody></tbody></table>`;
  const $ = (s) => main.querySelector(s);
  const fail = (msg) => { $("#volume-error").textContent = msg; $("#volume-error").hidden = !msg; };
  const mayDelete = await IP.can("delete", IP.STORAGE, "volumes", namespace, name);
  let volume = null, confirmDelete = false;
  const machineLink = (n) => `<a href="#/machine/${encodeURIComponent(namespace)}/${encodeURIComponent(n)}">${IP.esc(n)}</a>`;

  function actions() {
    if (!volume) return;
    $("#actions").innerHTML = !mayDelete ? '<span class="muted">Your role allows no actions on this Volume.</span>'
      : confirmDelete ? `<button id="delete-confirm" class="danger">Really delete ${IP.esc(name)}</button> <button id="delete-cancel">Keep it</button>`
        : '<button id="delete">Delete</button>';
  }
  $("#actions").addEventListener("click", async (ev) => {
    const id = ev.target.id;
    if (id === "delete") confirmDelete = true;
    else if (id === "delete-cancel") confirmDelete = false;
    else if (id === "delete-confirm") {
      confirmDelete = false;
      fail("");
      try { await IP.request("DELETE", path); } catch (e) { fail(e.message); }
    }
    actions();
  });

  function render() {
    const v = volume, s = v.status || {}, sp = v.spec || {};
    const state = v.metadata.deletionTimestamp ? "Terminating" : s.state || "Pending";
    const asked = IP.quantity(sp.resources && sp.resources.storage), has = IP.quantity(s.resources && s.resources.storage);
    const size = IP.bytes(asked) + (isFinite(has) && has !== asked ? ` <span class="muted">(provided ${IP.bytes(has)})</span>` : "");
    const att = s.attachment;
    const attached = att ? `to Machine ${machineLink(att.machineRef.name)} on pool ${IP.esc(att.pool)}${att.since ? `, for ${IP.age(att.since)}` : ""}` : '<span class="muted">not attached</span>';
    const labels = Object.entries(v.metadata.labels || {}).map(([k, val]) => `<span class="tag">${IP.esc(k)}=${IP.esc(val)}</span>`).join("") || '<span class="muted">none</span>';
    $("#facts").innerHTML = `
      <dt>State</dt><dd id="volume-state">${IP.state(state)}</dd>
      <dt>Size</dt><dd id="volume-size">${size}</dd>
      <dt>Pool</dt><dd id="volume-pool">${sp.volumePoolRef ? IP.esc(sp.volumePoolRef.name) : '<span class="muted">not placed yet</span>'}</dd>
      <dt>Class</dt><dd>${sp.volumeClassRef ? IP.esc(sp.volumeClassRef.name) : '<span class="muted">none (capacity only)</span>'}</dd>
      <dt>Claimed by</dt><dd id="volume-claim">${sp.claimRef ? "Machine " + machineLink(sp.claimRef.name) : sp.unclaimable ? '<span class="muted">unclaimable</span>' : '<span class="muted">no Machine</span>'}</dd>
      <dt>Attached</dt><dd id="volume-attachment">${attached}</dd>
      <dt>Access</dt><dd>${s.access ? IP.esc(`${s.access.driver}: ${s.access.handle}`) : '<span class="muted">not yet</span>'}</dd>
      <dt>Encryption</dt><dd>${sp.encryption ? "encrypted" : '<span class="muted">none</span>'}</dd>
      <dt>Volume ID</dt><dd>${IP.esc(s.volumeID || "")}</dd>
      <dt>Labels</dt><dd>${labels}</dd>
      <dt>Age</dt><dd>${IP.age(v.metadata.creationTimestamp)}</dd>`;
    $("#conditions tbody").innerHTML = IP.conditionRows(s.conditions);
    actions();
  }

  const stops = [
    IP.informer(IP.path(IP.STORAGE, "volumes", namespace), { fieldSelector: "metadata.name=" + name }, {
      sync(items) {
        if (!items.length) { fail(`Volume ${namespace}/${name} does not exist (or no longer).`); $("#actions").innerHTML = ""; return; }
        volume = items[0]; fail(""); render();
      },
      event(type, o) {
        if (type === "DELETED") { fail(`Volume ${namespace}/${name} was deleted.`); $("#actions").innerHTML = ""; return; }
        volume = o; render();
      },
      error(err) { fail(err.message); },
    }),
    IP.eventsOf(namespace, "Volume", name, $("#events tbody")),
  ];
  return () => stops.forEach((s) => s());
};
