/* Placement preview: paste or upload manifests and see where each Machine and Volume would land, and
 * why not. Machines are asked of the scheduler as the CLI, Pulumi preview and Ansible check mode ask
 * it (ironpool.client.predict): one dry-run Reservation per pool selector, planned whole and holding
 * nothing, removed once answered. Volumes are checked against the VolumePools' published allocatable
 * storage, classes, selectors and taints. Every request goes with the user's rights. */
"use strict";
(function () {
  const CLASS_PREFIX = "class/machine.";
  const PREDICTION_LABEL = "iaas.ironpool.dev/prediction";
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const cond = (o, type) => ((o.status && o.status.conditions) || []).find((c) => c.type === type);

  /** One dry-run Reservation for machines sharing a pool selector: [{pool, reason}] in their order. */
  async function askScheduler(namespace, machines, selector) {
    const counts = {};
    for (const m of machines) { const c = m.spec.machineClassRef.name; counts[c] = (counts[c] || 0) + 1; }
    const resources = {};
    for (const [c, n] of Object.entries(counts).sort()) resources[CLASS_PREFIX + c] = String(n);
    const spec = { resources, dryRun: true, ttlSecondsAfterCreation: 300 };
    if (Object.keys(selector).length) spec.poolSelector = selector;
    const path = IP.path(IP.COMPUTE, "reservations", namespace);
    const made = await IP.request("POST", path, { apiVersion: "compute.ironcore.dev/v1alpha1", kind: "Reservation",
      metadata: { generateName: "prediction-", labels: { [PREDICTION_LABEL]: "true" } }, spec });
    const own = IP.path(IP.COMPUTE, "reservations", namespace, made.metadata.name);
    let answered = null;
    try {
      const deadline = Date.now() + 30000;
      while (!answered) {
        const r = await IP.get(own);
        if (cond(r, "Scheduled")) answered = r;
        else if (Date.now() > deadline) throw new Error("no scheduler answered within 30 s (is the scheduler running?)");
        else await sleep(200);
      }
    } finally {
      IP.request("DELETE", own).catch(() => {});
    }
    const verdict = cond(answered, "Scheduled");
    const places = [];
    for (const e of (answered.status && answered.status.pools) || []) {
      for (const [key, raw] of Object.entries(e.resources || {})) {
        if (key.startsWith(CLASS_PREFIX)) for (let i = 0; i < IP.quantity(raw); i++) places.push([e.ref, key.slice(CLASS_PREFIX.length)]);
      }
    }
    const together = machines.length > 1 ? ` (with ${machines.length - 1} more of this set)` : "";
    return machines.map((m) => {
      const i = places.findIndex((p) => p[1] === m.spec.machineClassRef.name);
      if (i >= 0) { const [pool] = places.splice(i, 1)[0]; return { pool, reason: "fits" + together }; }
      return { pool: null, reason: `does not fit${together}: ${verdict.message || verdict.reason}` };
    });
  }

  const tolerated = (taint, tolerations) => (tolerations || []).some((t) =>
    (!t.key || t.key === taint.key) && (t.operator === "Exists" || (t.value || "") === (taint.value || "")) && (!t.effect || t.effect === taint.effect));

  /** Volumes against the VolumePools: the pool with the most room that takes each, or why none. A
   * pool's room is its allocatable storage less the Volumes bound to it (``bound``: pool -> bytes). */
  function placeVolumes(volumes, pools, bound) {
    const budget = (p) => { const st = p.status || {}; return IP.quantity((st.allocatable || st.capacity || {}).storage); };
    const free = new Map(pools.map((p) => [p.metadata.name, budget(p) - (bound.get(p.metadata.name) || 0)]));
    return volumes.map((v) => {
      const sp = v.spec || {}, cls = sp.volumeClassRef && sp.volumeClassRef.name;
      const size = IP.quantity(sp.resources && sp.resources.storage);
      if (sp.volumePoolRef) return { pool: sp.volumePoolRef.name, reason: `pinned to pool ${sp.volumePoolRef.name}` };
      if (!cls) return { pool: null, reason: "spec.volumeClassRef is required to place it" };
      if (!isFinite(size)) return { pool: null, reason: "spec.resources.storage is required to place it" };
      const selector = sp.volumePoolSelector || {};
      const checks = { available: 0, selected: 0, tolerated: 0, classed: 0 };
      let best = null, bestFree = -1;
      for (const p of pools) {
        const st = p.status || {};
        if (st.state !== "Available") continue; checks.available++;
        const labels = p.metadata.labels || {};
        if (!Object.entries(selector).every(([k, val]) => labels[k] === val)) continue; checks.selected++;
        if (!((p.spec && p.spec.taints) || []).every((t) => tolerated(t, sp.tolerations))) continue; checks.tolerated++;
        if (!(st.availableVolumeClasses || []).some((c) => c.name === cls)) continue; checks.classed++;
        const room = free.get(p.metadata.name);
        if (room > bestFree) { best = p.metadata.name; bestFree = room; }
      }
      if (best !== null && bestFree >= size) { free.set(best, bestFree - size); return { pool: best, reason: `fits: ${IP.bytes(bestFree)} free there` }; }
      let why;
      if (!pools.length) why = "there are no VolumePools";
      else if (!checks.available) why = `none of the ${pools.length} VolumePools is Available`;
      else if (!checks.selected) why = `no Available VolumePool matches the selector ${JSON.stringify(selector)}`;
      else if (!checks.tolerated) why = "every matching VolumePool has a taint the Volume does not tolerate";
      else if (!checks.classed) why = `no VolumePool offers the volume class ${cls}`;
      else why = `it needs ${IP.bytes(size)}; the most any pool offering ${cls} has free is ${IP.bytes(Math.max(0, bestFree))} (${best})`;
      return { pool: null, reason: "does not fit: " + why };
    });
  }

  async function preview(text, namespace) {
    const parsed = await IP.request("POST", "/ui/manifests", text, "application/yaml");
    const items = parsed.items;
    const results = new Array(items.length);
    const groups = new Map();
    const volumes = [];
    items.forEach((o, i) => {
      const key = `${o.metadata.namespace || namespace}/${o.metadata.name}`;
      results[i] = { kind: o.kind, key, pool: null, reason: "" };
      if (o.kind === "Machine") {
        const sp = o.spec || {};
        const within = (o.metadata.labels || {})["compute.ironcore.dev/reservation"];
        if (sp.machinePoolRef && sp.machinePoolRef.name) Object.assign(results[i], { pool: sp.machinePoolRef.name, reason: `pinned to pool ${sp.machinePoolRef.name}` });
        else if (!sp.machineClassRef || !sp.machineClassRef.name) results[i].reason = "does not fit: spec.machineClassRef is required";
        else if (within) results[i].reason = `placed within reservation ${within}: it holds the room, checked when applied`;
        else {
          const sel = sp.machinePoolSelector || {};
          const k = (o.metadata.namespace || namespace) + "|" + JSON.stringify(Object.entries(sel).sort());
          if (!groups.has(k)) groups.set(k, { ns: o.metadata.namespace || namespace, sel, members: [] });
          groups.get(k).members.push(i);
        }
      } else if (o.kind === "Volume") volumes.push(i);
      else results[i].reason = `a ${o.kind} is not placed on a pool`;
    });
    for (const g of groups.values()) {
      try {
        const answers = await askScheduler(g.ns, g.members.map((i) => items[i]), g.sel);
        g.members.forEach((i, j) => Object.assign(results[i], answers[j]));
      } catch (e) {
        g.members.forEach((i) => { results[i].reason = "could not ask the scheduler: " + e.message; });
      }
    }
    if (volumes.length) {
      try {
        const pools = (await IP.get(IP.path(IP.STORAGE, "volumepools"))).items;
        const bound = new Map();
        let note = "";
        try {
          for (const v of (await IP.get(IP.path(IP.STORAGE, "volumes"))).items) {
            const pool = v.spec && v.spec.volumePoolRef && v.spec.volumePoolRef.name;
            const size = IP.quantity(v.spec && v.spec.resources && v.spec.resources.storage);
            if (pool && isFinite(size)) bound.set(pool, (bound.get(pool) || 0) + size);
          }
        } catch (e) { note = " (Volumes already bound are not counted: you may not list all of them)"; }
        placeVolumes(volumes.map((i) => items[i]), pools, bound).forEach((a, j) => Object.assign(results[volumes[j]], a, { reason: a.reason + note }));
      } catch (e) {
        volumes.forEach((i) => { results[i].reason = "could not read the VolumePools: " + e.message; });
      }
    }
    return results;
  }

  IP.pages.preview = function (main) {
    main.innerHTML = `
      <h1>Placement preview</h1>
      <p class="muted">Paste manifests (YAML or JSON, several documents) or load a file: each Machine and Volume shows
      the pool it would land on now, or why it does not fit. Nothing is created.</p>
      <div class="filters">
        <label>Namespace (for manifests that name none)<input id="preview-ns" value="default"></label>
        <label>Load a file<input id="preview-file" type="file" accept=".yaml,.yml,.json"></label>
      </div>
      <textarea class="manifests" id="manifests" spellcheck="false" placeholder="apiVersion: compute.ironcore.dev/v1alpha1&#10;kind: Machine&#10;…"></textarea>
      <div class="actions"><button class="primary" id="run-preview" type="button">Preview placement</button><span class="muted" id="preview-state"></span></div>
      <div id="preview-error" class="error" hidden></div>
      <table id="placement" hidden><thead><tr><th>Kind</th><th>Object</th><th>Would land on</th><th>Why</th></tr></thead><tbody></tbody></table>`;
    const $ = (s) => main.querySelector(s);
    $("#manifests").value = sessionStorage.getItem("ironpool.preview") || "";
    $("#preview-file").addEventListener("change", async (ev) => {
      const file = ev.target.files[0];
      if (file) $("#manifests").value = await file.text();
    });
    $("#run-preview").addEventListener("click", async () => {
      const text = $("#manifests").value;
      sessionStorage.setItem("ironpool.preview", text);
      $("#preview-error").hidden = true;
      $("#run-preview").disabled = true;
      $("#preview-state").textContent = "Asking the scheduler…";
      try {
        const results = await preview(text, $("#preview-ns").value.trim() || "default");
        $("#placement tbody").innerHTML = results.map((r) => {
          const fits = r.pool !== null;
          return `<tr><td>${IP.esc(r.kind)}</td><td>${IP.esc(r.key)}</td><td class="${fits ? "fits" : r.reason.startsWith("does not fit") ? "nofit" : ""}">${fits ? IP.esc(r.pool) : r.reason.startsWith("does not fit") ? "nowhere" : "–"}</td><td class="reason">${IP.esc(r.reason)}</td></tr>`;
        }).join("") || '<tr><td colspan="4" class="muted">No objects in the manifests.</td></tr>';
        $("#placement").hidden = false;
        $("#preview-state").textContent = "";
      } catch (e) {
        $("#preview-error").textContent = e.message;
        $("#preview-error").hidden = false;
        $("#preview-state").textContent = "";
      } finally { $("#run-preview").disabled = false; }
    });
  };
})();
