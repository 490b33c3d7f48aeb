/* The Machines and Volumes pages: a live list filtered by namespace and label selector (both asked of
 * the server, so RBAC and the selector apply there), with state, pool, addresses and age. */
"use strict";
(function () {
  const COLUMNS = {
    machines: {
      title: "Machines", group: IP.COMPUTE,
      head: ["Name", "Namespace", "State", "Power", "Pool", "Addresses", "Class", "Age"],
      cells: (m) => {
        const s = m.status || {}, sp = m.spec || {};
        const state = m.metadata.deletionTimestamp ? "Terminating" : s.state || "Pending";
        const link = `#/machine/${encodeURIComponent(m.metadata.namespace)}/${encodeURIComponent(m.metadata.name)}`;
        return [`<a href="${link}">${IP.esc(m.metadata.name)}</a>`, IP.esc(m.metadata.namespace), IP.state(state),
          IP.state(sp.power || "On"), sp.machinePoolRef ? IP.esc(sp.machinePoolRef.name) : '<span class="muted">not placed</span>',
          IP.esc(IP.addresses(m).join(", ")), IP.esc(sp.machineClassRef && sp.machineClassRef.name), IP.age(m.metadata.creationTimestamp)];
      },
    },
    volumes: {
      title: "Volumes", group: IP.STORAGE,
      head: ["Name", "Namespace", "State", "Pool", "Class", "Size", "Age"],
      cells: (v) => {
        const s = v.status || {}, sp = v.spec || {};
        const state = v.metadata.deletionTimestamp ? "Terminating" : s.state || "Pending";
        const size = IP.quantity(sp.resources && sp.resources.storage);
        const link = `#/volume/${encodeURIComponent(v.metadata.namespace)}/${encodeURIComponent(v.metadata.name)}`;
        return [`<a href="${link}">${IP.esc(v.metadata.name)}</a>`, IP.esc(v.metadata.namespace), IP.state(state),
          sp.volumePoolRef ? IP.esc(sp.volumePoolRef.name) : '<span class="muted">not placed</span>',
          IP.esc(sp.volumeClassRef && sp.volumeClassRef.name), IP.bytes(size), IP.age(v.metadata.creationTimestamp)];
      },
    },
  };

  function listPage(plural) {
    const spec = COLUMNS[plural];
    return async function (main) {
      const saved = JSON.parse(sessionStorage.getItem("ironpool.filter." + plural) || "{}");
      main.innerHTML = `
        <h1>${spec.title}</h1>
        <div class="filters">
          <label>Namespace<select id="ns"><option value="">all namespaces</option></select></label>
          <label>Label selector<input id="labels" placeholder="app=web,tier!=gold" size="28"></label>
          <button id="apply-filter" type="button">Filter</button>
          <span class="muted" id="count"></span>
        </div>
        <div id="list-error" class="error" hidden></div>
        <table id="${plural}"><thead><tr>${spec.head.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody></tbody></table>`;
      const $ = (s) => main.querySelector(s);
      const nsSelect = $("#ns");
      $("#labels").value = saved.labels || "";
      try {
        const nss = await IP.get("/api/v1/namespaces");
        for (const n of nss.items) nsSelect.insertAdjacentHTML("beforeend", `<option>${IP.esc(n.metadata.name)}</option>`);
      } catch (e) { // may not list namespaces: offer the one typed or "default"
        nsSelect.insertAdjacentHTML("beforeend", `<option>default</option>`);
      }
      if (saved.ns && ![...nsSelect.options].some((o) => o.value === saved.ns)) nsSelect.insertAdjacentHTML("beforeend", `<option>${IP.esc(saved.ns)}</option>`);
      nsSelect.value = saved.ns || "";
      let stop = null, items = new Map(), timer = null;
      const paint = () => {
        timer = null;
        const list = [...items.values()].sort((a, b) => (a.metadata.namespace + "/" + a.metadata.name).localeCompare(b.metadata.namespace + "/" + b.metadata.name));
        $(`#${plural} tbody`).innerHTML = list.map((o) => `<tr data-name="${IP.esc(o.metadata.name)}">${spec.cells(o).map((c) => `<td>${c}</td>`).join("")}</tr>`).join("") ||
          `<tr><td colspan="${spec.head.length}" class="muted">No ${plural}.</td></tr>`;
        $("#count").textContent = `${list.length} shown, live`;
      };
      const schedule = () => { if (timer === null) timer = setTimeout(paint, 100); };
      function start() {
        if (stop) stop();
        items = new Map();
        const ns = nsSelect.value, labels = $("#labels").value.trim();
        sessionStorage.setItem("ironpool.filter." + plural, JSON.stringify({ ns, labels }));
        const key = (o) => o.metadata.namespace + "/" + o.metadata.name;
        $("#list-error").hidden = true;
        stop = IP.informer(IP.path(spec.group, plural, ns || null), labels ? { labelSelector: labels } : {}, {
          sync(list) { items = new Map(list.map((o) => [key(o), o])); schedule(); },
          event(type, o) { if (type === "DELETED") items.delete(key(o)); else items.set(key(o), o); schedule(); },
          error(err) {
            const hint = err.code === 403 && !ns ? " Choose a namespace you may read." : "";
            $("#list-error").textContent = err.message + hint;
            $("#list-error").hidden = false;
          },
        });
      }
      nsSelect.addEventListener("change", start);
      $("#apply-filter").addEventListener("click", start);
      $("#labels").addEventListener("keydown", (e) => { if (e.key === "Enter") start(); });
      start();
      const ages = setInterval(schedule, 10000); // ages move on
      return () => { if (stop) stop(); clearInterval(ages); if (timer !== null) clearTimeout(timer); };
    };
  }
  IP.pages.machines = listPage("machines");
  IP.pages.volumes = listPage("volumes");
})();
