/* Numbers with units, ages, states in colour and words. */
"use strict";
(function () {
  const SUFFIX = { n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6 };
  /** A Kubernetes quantity ("500m", "8Gi", "1k", "2") as a number; NaN if none. */
  IP.quantity = function (q) {
    if (q === undefined || q === null) return NaN;
    const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(q).trim());
    if (!m || !(m[2] in SUFFIX)) return NaN;
    return parseFloat(m[1]) * SUFFIX[m[2]];
  };
  IP.bytes = function (n) {
    if (!isFinite(n)) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(n >= 100 ? 0 : 1)) + " " + units[i];
  };
  IP.cores = (n) => (!isFinite(n) ? "–" : (Number.isInteger(n) ? n : n.toFixed(2)) + (n === 1 ? " core" : " cores"));
  IP.age = function (ts) {
    if (!ts) return "";
    let s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
    if (s < 120) return Math.floor(s) + "s";
    s /= 60; if (s < 120) return Math.floor(s) + "m";
    s /= 60; if (s < 48) return Math.floor(s) + "h";
    return Math.floor(s / 24) + "d";
  };
  const CLASSES = { Running: "ok", Ready: "ok", Available: "ok", Bound: "ok", True: "ok", Accepted: "ok",
    Pending: "warn", Unknown: "warn", Terminating: "warn", Shutdown: "off", Off: "off",
    Error: "bad", Offline: "bad", Unavailable: "bad", Failed: "bad", False: "bad", Rejected: "bad" };
  /** A state as a coloured word. */
  IP.state = (word) => `<span class="state s-${CLASSES[word] || "off"}">${IP.esc(word || "Unknown")}</span>`;
  /** A usage bar: used of total, labelled with units by fmt. */
  IP.bar = function (used, total, fmt) {
    if (!isFinite(total) || total <= 0) return '<span class="muted">none offered</span>';
    if (!isFinite(used)) return `<span class="bar"></span><span class="bar-label">– of ${fmt(total)} allocated</span>`;
    const frac = Math.min(1, Math.max(0, used / total));
    const cls = frac >= 0.95 ? "bar full" : frac >= 0.75 ? "bar high" : "bar";
    return `<span class="${cls}" title="${Math.round(frac * 100)}% allocated"><span style="width:${(frac * 100).toFixed(1)}%"></span></span>` +
      `<span class="bar-label">${fmt(used)} of ${fmt(total)} allocated</span>`;
  };
  /** A Machine's addresses: its NICs' IPs. */
  IP.addresses = (m) => ((m.status && m.status.networkInterfaces) || []).flatMap((n) => n.ips || []);
  IP.condition = (obj, type) => ((obj.status && obj.status.conditions) || []).find((c) => c.type === type);
})();
