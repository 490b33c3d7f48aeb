/* What the detail pages share: a conditions table and an object's Events, live. */
"use strict";
(function () {
  const when = (e) => e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp;

  /** The rows of a conditions table (type, status, reason, message, since). */
  IP.conditionRows = (conditions) => (conditions || []).map((c) => `<tr><td>${IP.esc(c.type)}</td><td>${IP.state(c.status)}</td><td>${IP.esc(c.reason)}</td><td>${IP.esc(c.message)}</td><td>${IP.age(c.lastTransitionTime)}</td></tr>`).join("") ||
    '<tr><td colspan="5" class="muted">none</td></tr>';

  /** The Events of object ``kind`` ``name`` in ``namespace``, newest first, kept current in ``tbody``.
   * Returns stop(). */
  IP.eventsOf = function (namespace, kind, name, tbody) {
    const events = new Map();
    function render() {
      const list = [...events.values()].filter((e) => e.involvedObject && e.involvedObject.kind === kind && e.involvedObject.name === name)
        .sort((a, b) => Date.parse(when(b)) - Date.parse(when(a)));
      tbody.innerHTML = list.map((e) => `<tr><td>${IP.age(when(e))}</td><td><span class="state s-${e.type === "Warning" ? "bad" : "ok"}">${IP.esc(e.type)}</span></td><td>${IP.esc(e.reason)}</td><td>${IP.esc(e.source && e.source.component)}</td><td>${IP.esc(e.message)}${e.count > 1 ? ` <span class="muted">×${e.count}</span>` : ""}</td></tr>`).join("") ||
        '<tr><td colspan="5" class="muted">none</td></tr>';
    }
    return IP.informer(IP.path("", "events", namespace), {}, {
      sync(items) { events.clear(); items.forEach((e) => events.set(e.metadata.name, e)); render(); },
      event(type, e) { if (type === "DELETED") events.delete(e.metadata.name); else events.set(e.metadata.name, e); render(); },
      error() { tbody.innerHTML = '<tr><td colspan="5" class="muted">You may not read Events here.</td></tr>'; },
    });
  };

  IP.EVENTS_HEAD = "<thead><tr><th>Last seen</th><th>Type</th><th>Reason</th><th>From</th><th>Message</th></tr></thead>";
  IP.CONDITIONS_HEAD = "<thead><tr><th>Type</th><th>Status</th><th>Reason</th><th>Message</th><th>Since</th></tr></thead>";
})();
