/* The fleet page: every MachinePool and VolumePool with what is allocated of what it has, readiness,
 * taints and cordon state; a heat map of all of them; live through watches. Changes are gathered and
 * drawn at most a few times a second (one animation frame), and a changed pool repaints only its cell
 * and, if shown, its row: a fleet of thousands stays smooth while it changes. */
"use strict";
(function () {
  const CORDON = "pool.ironpool.dev/unschedulable";
  const UNREACHABLE = "pool.ironpool.dev/unreachable";
  const ROWS = 200; // rows per table; the heat map shows every pool, the filter finds any
  const PAINT_MS = 250;
  const TABLES_MS = 1000;

  function frac(used, total) { return isFinite(used) && isFinite(total) && total > 0 ? used / total : 0; }

  /** Taints as the TAINTS column prints them (``key=value:effect``, comma-separated). */
  function parseTaints(text) {
    return (text ? String(text).split(",") : []).map((t) => {
      const colon = t.lastIndexOf(":"), kv = t.slice(0, colon), eq = kv.indexOf("=");
      return { key: eq < 0 ? kv : kv.slice(0, eq), value: eq < 0 ? "" : kv.slice(eq + 1), effect: t.slice(colon + 1) };
    });
  }

  /** A pool's budget from its column (``allocatable/capacity``): status.allocatable, capacity where
   * it names none, as the capacity admission counts it. */
  function budget(cell) {
    if (!cell) return NaN;
    const [alloc, cap] = String(cell).split("/");
    return IP.quantity(alloc !== "?" ? alloc : cap);
  }

  /** What the page shows of one pool, from its Table row (the pool kinds' printer columns: the page
   * loads printed cells, not whole objects); its allocation comes from ``measure``. */
  function summarize(row, kind) {
    const c = row.cells, taints = parseTaints(c.TAINTS);
    const p = { kind, name: row.metadata.name, state: c.STATE || "Unknown", taints,
      cordoned: taints.some((t) => t.key === CORDON), unreachable: taints.some((t) => t.key === UNREACHABLE) };
    if (kind === "machine") {
      p.ready = p.state === "Ready";
      p.total = { cpu: budget(c.CPU), memory: budget(c.MEMORY) };
      p.classes = c.MACHINECLASSES ? String(c.MACHINECLASSES).split(",") : [];
    } else {
      p.ready = p.state === "Available";
      p.total = { storage: budget(c.STORAGE) };
      p.classes = c.VOLUMECLASSES ? String(c.VOLUMECLASSES).split(",") : [];
    }
    return p;
  }

  /** A pool's allocation from the usage; whether it changed. Unknown (NaN) when the user may not
   * list what it counts. */
  function measure(p, usage) {
    const known = usage.known(p.kind), used = usage.of(p.kind, p.name);
    const pair = (r) => [known ? used[r] || 0 : NaN, p.total[r]];
    const before = String([p.cpu, p.mem, p.storage]);
    if (p.kind === "machine") {
      p.cpu = pair("cpu"); p.mem = pair("memory");
      p.util = Math.max(frac(...p.cpu), frac(...p.mem));
    } else {
      p.storage = pair("storage");
      p.util = frac(...p.storage);
    }
    return before !== String([p.cpu, p.mem, p.storage]);
  }

  const CELL = 12, PITCH = 14;

  /** The heat map: one canvas, a cell per pool coloured by how much of it is allocated (grey: not
   * ready, red frame; dashed frame: cordoned). Thousands of cells cost one element, and a change
   * repaints one cell. Hovering names a cell's pool; clicking finds it in the tables. */
  function heatMap(canvas, tipEl, onPick) {
    let order = [], index = new Map(), cols = 1;
    const ctx = canvas.getContext("2d");
    const ratio = window.devicePixelRatio || 1;
    function cell(p, i) {
      const x = (i % cols) * PITCH, y = Math.floor(i / cols) * PITCH;
      ctx.clearRect(x, y, PITCH, PITCH);
      ctx.fillStyle = color(p);
      ctx.fillRect(x, y, CELL, CELL);
      if (!p.ready || p.cordoned) {
        ctx.strokeStyle = p.ready ? "#333" : "#c62828";
        ctx.lineWidth = 2;
        ctx.setLineDash(p.cordoned ? [3, 2] : []);
        ctx.strokeRect(x + 1, y + 1, CELL - 2, CELL - 2);
        ctx.setLineDash([]);
      }
    }
    function at(ev) {
      const r = canvas.getBoundingClientRect();
      const c = Math.floor((ev.clientX - r.left) / PITCH), row = Math.floor((ev.clientY - r.top) / PITCH);
      return c < cols ? order[row * cols + c] : undefined;
    }
    canvas.addEventListener("mousemove", (ev) => {
      const p = at(ev);
      tipEl.hidden = !p;
      if (p) { tipEl.textContent = tip(p); tipEl.style.left = ev.offsetX + 14 + "px"; tipEl.style.top = ev.offsetY + 14 + "px"; }
    });
    canvas.addEventListener("mouseleave", () => { tipEl.hidden = true; });
    canvas.addEventListener("click", (ev) => { const p = at(ev); if (p) onPick(p.name); });
    return {
      draw(all) {
        order = all;
        index = new Map(all.map((p, i) => [p.kind + "/" + p.name, i]));
        const width = canvas.parentElement.clientWidth || 800;
        cols = Math.max(1, Math.floor(width / PITCH));
        const height = Math.max(1, Math.ceil(all.length / cols)) * PITCH;
        canvas.width = cols * PITCH * ratio; canvas.height = height * ratio;
        canvas.style.width = cols * PITCH + "px"; canvas.style.height = height + "px";
        ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
        all.forEach(cell);
        canvas.dataset.count = String(all.length);
        const notReady = all.filter((p) => !p.ready).length;
        canvas.setAttribute("aria-label", `Heat map of ${all.length} pools, ${notReady} not ready`);
      },
      update(p) {
        const i = index.get(p.kind + "/" + p.name);
        if (i !== undefined) { order[i] = p; cell(p, i); }
      },
    };
  }

  const color = (p) => (p.ready ? `hsl(${Math.round(120 - 120 * Math.min(1, p.util))},62%,44%)` : "#9aa3b2");
  const tip = (p) => `${p.name} (${p.kind === "machine" ? "MachinePool" : "VolumePool"}): ${p.state}` +
    (p.cordoned ? ", cordoned" : "") + ` — ${Math.round(p.util * 100)}% allocated`;

  function stateCell(p) {
    let html = IP.state(p.state);
    if (p.cordoned) html += ' <span class="tag warn">cordoned</span>';
    if (p.unreachable) html += ' <span class="tag warn">unreachable</span>';
    return html;
  }
  const taintText = (p) => p.taints.map((t) => `<span class="tag">${IP.esc(t.key)}${t.value ? "=" + IP.esc(t.value) : ""}:${IP.esc(t.effect)}</span>`).join("") || '<span class="muted">none</span>';
  const classText = (p) => (p.classes.length > 6 ? IP.esc(p.classes.slice(0, 6).join(", ")) + ` <span class="muted">+${p.classes.length - 6} more</span>` : IP.esc(p.classes.join(", ")) || '<span class="muted">none</span>');

  function row(p) {
    const cells = p.kind === "machine"
      ? `<td>${IP.bar(p.cpu[0], p.cpu[1], IP.cores)}</td><td>${IP.bar(p.mem[0], p.mem[1], IP.bytes)}</td>`
      : `<td>${IP.bar(p.storage[0], p.storage[1], IP.bytes)}</td>`;
    return `<tr data-pool="${IP.esc(p.name)}"><td>${IP.esc(p.name)}</td><td>${stateCell(p)}</td>${cells}<td>${classText(p)}</td><td>${taintText(p)}</td></tr>`;
  }

  const SORTS = {
    name: (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
    full: (a, b) => b.util - a.util || SORTS.name(a, b),
    unready: (a, b) => (a.ready - b.ready) || (b.cordoned - a.cordoned) || SORTS.name(a, b),
  };

  IP.pages.fleet = function (main) {
    main.innerHTML = `
      <h1>Fleet</h1>
      <div id="fleet-error" class="error" hidden></div>
      <div class="card summary" id="fleet-summary"><span class="muted">Loading pools…</span></div>
      <div class="card" id="heat-card" hidden>
        <div class="legend"><b>All pools</b>
          <span><i style="background:hsl(120,62%,44%)"></i>free</span><span><i style="background:hsl(60,62%,44%)"></i>half allocated</span>
          <span><i style="background:hsl(0,62%,44%)"></i>full</span><span><i style="background:#9aa3b2;outline:2px solid #c62828;outline-offset:-2px"></i>not ready</span>
          <span><i style="background:hsl(120,62%,44%);outline:2px dashed #333;outline-offset:-2px"></i>cordoned</span>
          <span class="muted">(a cell per pool; click one to find it below)</span></div>
        <div class="heatmap"><canvas id="heat" role="img"></canvas><div id="heat-tip" class="heat-tip" hidden></div></div>
      </div>
      <div class="filters">
        <label>Find a pool<input id="pool-filter" placeholder="name contains…"></label>
        <label>Order<select id="pool-sort"><option value="name">by name</option><option value="full">most allocated first</option><option value="unready">not ready or cordoned first</option></select></label>
      </div>
      <h2>Machine pools <span class="muted" id="mp-count"></span></h2>
      <table id="machinepools"><thead><tr><th>Name</th><th>State</th><th>CPU</th><th>Memory</th><th>Machine classes</th><th>Taints</th></tr></thead><tbody></tbody></table>
      <h2>Volume pools <span class="muted" id="vp-count"></span></h2>
      <table id="volumepools"><thead><tr><th>Name</th><th>State</th><th>Storage</th><th>Volume classes</th><th>Taints</th></tr></thead><tbody></tbody></table>`;
    const $ = (s) => main.querySelector(s);
    const pools = { machine: new Map(), volume: new Map() };
    const synced = { machine: false, volume: false };
    const errors = {};
    const heat = heatMap($("#heat"), $("#heat-tip"), (pool) => { $("#pool-filter").value = pool; tables(); $("#machinepools").scrollIntoView(); });
    let shown = new Set(); // "kind/name" of the pools the tables show
    let usageMoved = false, tablesStale = false, lastTables = 0;
    const usage = IP.PoolUsage(() => { usageMoved = true; schedule(false); });
    let full = true, dirty = new Set(), timer = null, first = true, lastPaint = 0;

    function schedule(whole) {
      if (whole) full = true;
      if (timer !== null) return;
      const wait = Math.max(0, PAINT_MS - (performance.now() - lastPaint));
      timer = setTimeout(() => requestAnimationFrame(paint), first ? 0 : wait);
    }

    function paint() {
      timer = null;
      lastPaint = performance.now();
      if (!synced.machine || !synced.volume || !usage.ready()) return;
      performance.mark("ip:fleet-paint");
      const all = [...pools.machine.values(), ...pools.volume.values()];
      if (usageMoved) {
        usageMoved = false;
        for (const p of all) if (measure(p, usage) && !full) dirty.add(p.kind + "/" + p.name);
      }
      if (full) { $("#heat-card").hidden = all.length === 0; heat.draw(all); }
      else for (const key of dirty) {
        const i = key.indexOf("/"), p = pools[key.slice(0, i)].get(key.slice(i + 1));
        if (p) heat.update(p);
      }
      // The tables show a few hundred rows: redraw them only if a change may show there, and while
      // pools keep changing at most once a second (the heat map shows every change at once).
      if (full || $("#pool-sort").value !== "name" || [...dirty].some((k) => shown.has(k))) tablesStale = true;
      const now = performance.now();
      if (tablesStale && (full || now - lastTables >= TABLES_MS)) { tables(); tablesStale = false; lastTables = now; }
      else if (tablesStale && timer === null) timer = setTimeout(() => requestAnimationFrame(paint), TABLES_MS - (now - lastTables));
      full = false;
      dirty = new Set();
      summary(all);
      performance.mark("ip:fleet-painted");
      if (first) {
        first = false;
        requestAnimationFrame(() => { window.ipFleetRenderedAt = performance.now(); main.dataset.rendered = "true"; });
      }
    }

    function tables() {
      const needle = $("#pool-filter").value.trim().toLowerCase();
      const sort = SORTS[$("#pool-sort").value] || SORTS.name;
      shown = new Set();
      for (const [kind, id, count] of [["machine", "#machinepools", "#mp-count"], ["volume", "#volumepools", "#vp-count"]]) {
        if (errors[kind]) continue;
        let list = [...pools[kind].values()];
        if (needle) list = list.filter((p) => p.name.toLowerCase().includes(needle));
        list.sort(sort);
        const rows = list.slice(0, ROWS);
        for (const p of rows) shown.add(p.kind + "/" + p.name);
        $(id + " tbody").innerHTML = rows.map(row).join("") ||
          `<tr><td colspan="6" class="muted">${needle ? "No pool matches." : "No pools."}</td></tr>`;
        $(count).textContent = list.length > ROWS ? `(showing ${ROWS} of ${list.length}: find one to narrow)` : `(${list.length})`;
      }
    }

    function summary(all) {
      const ms = [...pools.machine.values()], vs = [...pools.volume.values()];
      const sum = (xs, f) => xs.reduce((a, p) => a + (isFinite(f(p)) ? f(p) : 0), 0);
      const readyM = ms.filter((p) => p.ready).length, readyV = vs.filter((p) => p.ready).length;
      const cordoned = all.filter((p) => p.cordoned).length;
      $("#fleet-summary").innerHTML = `
        <div><b>${ms.length}</b>machine pools, ${readyM} ready</div>
        <div><b>${vs.length}</b>volume pools, ${readyV} available</div>
        <div><b>${cordoned}</b>cordoned</div>
        <div><b>${IP.cores(sum(ms, (p) => p.cpu[0]))}</b>of ${IP.cores(sum(ms, (p) => p.cpu[1]))} allocated</div>
        <div><b>${IP.bytes(sum(ms, (p) => p.mem[0]))}</b>of ${IP.bytes(sum(ms, (p) => p.mem[1]))} memory allocated</div>
        <div><b>${IP.bytes(sum(vs, (p) => p.storage[0]))}</b>of ${IP.bytes(sum(vs, (p) => p.storage[1]))} storage allocated</div>` +
        (usage.known("machine") && usage.known("volume") ? "" : '<div class="muted">Allocation counts the Machines and Volumes of all namespaces, which your role may not list: it shows as –.</div>');
    }

    function showErrors() {
      const msgs = Object.entries(errors).map(([k, e]) => `${k === "machine" ? "Machine" : "Volume"} pools: ${e.message}`);
      $("#fleet-error").textContent = msgs.join(" · ");
      $("#fleet-error").hidden = msgs.length === 0;
    }

    function informer(kind, group, plural) {
      return IP.informer(IP.path(group, plural), {}, {
        table: true,
        sync(items) {
          pools[kind] = new Map(items.map((o) => [o.metadata.name, summarize(o, kind)]));
          for (const p of pools[kind].values()) measure(p, usage);
          performance.mark("ip:summarized " + kind);
          synced[kind] = true;
          delete errors[kind];
          showErrors();
          schedule(true);
        },
        event(type, o) {
          const name = o.metadata.name;
          if (type === "DELETED") { pools[kind].delete(name); schedule(true); return; }
          const known = pools[kind].has(name);
          const p = summarize(o, kind);
          measure(p, usage);
          pools[kind].set(name, p);
          dirty.add(kind + "/" + name);
          schedule(!known);
        },
        error(err) {
          errors[kind] = err;
          if (err.code === 403) { synced[kind] = true; schedule(true); } // show what may be seen
          showErrors();
        },
      });
    }
    const stops = [informer("machine", IP.COMPUTE, "machinepools"), informer("volume", IP.STORAGE, "volumepools")];
    $("#pool-filter").addEventListener("input", () => tables());
    $("#pool-sort").addEventListener("change", () => tables());
    return () => { stops.forEach((s) => s()); usage.stop(); if (timer !== null) clearTimeout(timer); };
  };
})();
