/* What each pool has allocated, as the apiserver's capacity admission counts it (docs/architecture.md,
 * "Capacity accounting"): a pool's status.allocatable is its whole budget and is not reduced by what is
 * bound to it, so the page adds up the demands itself from the objects the user may read: every bound
 * Machine its class's cpu and memory, every bound Volume its storage, and every Reservation that holds
 * room there what its Machines placed within it do not use yet. Live through watches. */
"use strict";
(function () {
  const CLASS_PREFIX = "class/machine.";
  const RESERVATION_LABEL = "compute.ironcore.dev/reservation";
  const cond = (o, type) => ((o.status && o.status.conditions) || []).find((c) => c.type === type);

  /** Whether a Reservation holds room now (ironpool.api.reservation.holds). */
  function holds(r) {
    if ((r.spec && r.spec.dryRun) || r.metadata.deletionTimestamp) return false;
    const exp = cond(r, "Expired"), sched = cond(r, "Scheduled");
    if ((exp && exp.status === "True") || (sched && sched.status === "False")) return false;
    const entries = (r.status && r.status.pools) || [];
    return entries.some((e) => e.resources && Object.keys(e.resources).length) && !entries.some((e) => e.state === "Rejected");
  }

  /** Usage of every pool from Machines, Volumes, Reservations and MachineClasses, kept live.
   * onChange() is called (batched by the caller) whenever a figure may have moved. */
  IP.PoolUsage = function (onChange) {
    const objs = { machineclasses: new Map(), machines: new Map(), volumes: new Map(), reservations: new Map() };
    const readable = { machineclasses: false, machines: false, volumes: false, reservations: false };
    const errors = {};
    let cache = null;
    const key = (o) => (o.metadata.namespace || "") + "/" + o.metadata.name;
    // Machines and Volumes are watched; classes and Reservations change seldom and are listed every
    // 15 s (a page keeps few watches: see IP.informer).
    const sources = [["machineclasses", IP.COMPUTE, 15], ["machines", IP.COMPUTE, 0], ["volumes", IP.STORAGE, 0], ["reservations", IP.COMPUTE, 15]];
    const stops = sources.map(([plural, group, poll]) => IP.informer(IP.path(group, plural), {}, {
      pollSeconds: poll,
      sync(items) { objs[plural] = new Map(items.map((o) => [key(o), o])); readable[plural] = true; delete errors[plural]; cache = null; onChange(); },
      event(type, o) { if (type === "DELETED") objs[plural].delete(key(o)); else objs[plural].set(key(o), o); cache = null; onChange(); },
      error(err) { errors[plural] = err; onChange(); },
    }));

    function compute() {
      const cls = new Map();
      for (const c of objs.machineclasses.values()) {
        const cap = c.capabilities || {};
        cls.set(c.metadata.name, { cpu: IP.quantity(cap.cpu) || 0, memory: IP.quantity(cap.memory) || 0 });
      }
      const machine = new Map(), volume = new Map(); // pool -> amounts
      const within = new Map(); // "ns/reservation|pool" -> amounts of the Machines placed within it there
      const add = (map, k, res, n) => { const a = map.get(k) || {}; a[res] = (a[res] || 0) + n; map.set(k, a); };
      for (const m of objs.machines.values()) {
        const pool = m.spec && m.spec.machinePoolRef && m.spec.machinePoolRef.name;
        const c = pool && cls.get(m.spec.machineClassRef && m.spec.machineClassRef.name);
        if (!c) continue;
        add(machine, pool, "cpu", c.cpu); add(machine, pool, "memory", c.memory);
        const r = (m.metadata.labels || {})[RESERVATION_LABEL];
        if (r) { const k = `${m.metadata.namespace}/${r}|${pool}`; add(within, k, "cpu", c.cpu); add(within, k, "memory", c.memory); }
      }
      for (const v of objs.volumes.values()) {
        const pool = v.spec && v.spec.volumePoolRef && v.spec.volumePoolRef.name;
        const size = IP.quantity(v.spec && v.spec.resources && v.spec.resources.storage);
        if (pool && isFinite(size)) add(volume, pool, "storage", size);
      }
      for (const r of objs.reservations.values()) {
        if (!holds(r)) continue;
        for (const e of r.status.pools || []) {
          const held = {};
          for (const [k, raw] of Object.entries(e.resources || {})) {
            const n = IP.quantity(raw);
            if (!isFinite(n)) continue;
            if (k.startsWith(CLASS_PREFIX)) {
              const c = cls.get(k.slice(CLASS_PREFIX.length));
              if (c) { held.cpu = (held.cpu || 0) + n * c.cpu; held.memory = (held.memory || 0) + n * c.memory; }
            } else if (k === "cpu" || k === "memory") held[k] = (held[k] || 0) + n;
          }
          const used = within.get(`${r.metadata.namespace}/${r.metadata.name}|${e.ref}`) || {};
          for (const [res, n] of Object.entries(held)) add(machine, e.ref, res, Math.max(0, n - (used[res] || 0)));
        }
      }
      return { machine, volume };
    }

    return {
      /** The used amounts of pool ``name`` of ``kind`` ("machine" or "volume"): {cpu, memory} or {storage}. */
      of(kind, name) { if (!cache) cache = compute(); return cache[kind].get(name) || {}; },
      /** Whether the figures of ``kind`` pools are complete: the user may list what they count. */
      known(kind) { return kind === "machine" ? readable.machines && readable.machineclasses : readable.volumes; },
      errors,
      /** Every source listed (or refused): the figures are as complete as they will be. */
      ready() { return sources.every(([plural]) => readable[plural] || errors[plural]); },
      stop() { stops.forEach((s) => s()); },
    };
  };
})();
