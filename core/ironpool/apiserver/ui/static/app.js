/* The web console's core: the user's credentials, requests to the REST paths, list-and-watch
 * (informers), access reviews and the page router. Pages register themselves in IP.pages. */
"use strict";
const IP = (window.IP = { pages: {}, user: null });
const TOKEN_KEY = "ironpool.token";

IP.token = () => sessionStorage.getItem(TOKEN_KEY) || "";
IP.setToken = (t) => (t ? sessionStorage.setItem(TOKEN_KEY, t) : sessionStorage.removeItem(TOKEN_KEY));

/** An API error: the server's Status (code, reason, message). */
class ApiError extends Error {
  constructor(code, status) {
    super((status && status.message) || `HTTP ${code}`);
    this.code = code;
    this.reason = (status && status.reason) || "";
  }
}
IP.ApiError = ApiError;

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const t = IP.token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

/** A request to the apiserver with the user's credentials; the decoded JSON, or an ApiError. A 401
 * anywhere ends the session: the login page, never data. */
IP.request = async function (method, path, body, contentType, accept) {
  const extra = body === undefined ? {} : { "Content-Type": contentType || "application/json" };
  if (accept) extra.Accept = accept;
  const init = { method, headers: headers(extra) };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const res = await fetch(path, init);
  const text = await res.text();
  performance.mark("ip:received " + path);
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { message: text }; }
  performance.mark("ip:parsed " + path);
  if (res.status === 401) { IP.signOut("Your token was not accepted: " + ((data && data.message) || "unauthorized")); }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
};
IP.get = (path) => IP.request("GET", path);

/** Resource paths. */
IP.path = function (group, plural, namespace, name) {
  const base = group ? `/apis/${group}/v1alpha1` : "/api/v1";
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  return `${base}${ns}/${plural}${name ? "/" + encodeURIComponent(name) : ""}`;
};
IP.COMPUTE = "compute.ironcore.dev";
IP.STORAGE = "storage.ironcore.dev";

/** The server-side printing kubectl asks for: a meta.k8s.io Table of the kind's printer columns. */
IP.TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io";

/** The rows of a Table as {name, cells: {COLUMN: value}}, named by ``columns`` (the list's column
 * definitions: a watch's later Tables carry none). */
IP.tableRows = function (table, columns) {
  const nameAt = Math.max(0, columns.findIndex((c) => c.format === "name"));
  return (table.rows || []).map((r) => {
    const cells = {};
    columns.forEach((c, i) => { cells[c.name] = r.cells[i]; });
    return { metadata: { name: r.cells[nameAt] }, cells };
  });
};

/** List, then watch from the list's resourceVersion; on a broken or expired watch, list again.
 * handlers: sync(items) once per (re)list, event(type, object) per change, error(err); with
 * handlers.pollSeconds it lists again that often instead of watching. With handlers.table the list and
 * the watch ask for Tables without objects (includeObject=None): the items are IP.tableRows, a few
 * printed cells instead of whole objects (the fleet page's thousands of pools load in a tenth of the
 * bytes, none of them managedFields). A watch holds a connection for
 * as long as it runs, and a browser opens at most six HTTP/1.1 connections to one server: a page keeps
 * at most four watches, so its other requests (and the next page's) always find a connection; what
 * changes seldom (classes, reservations) is polled. Returns stop(). */
IP.informer = function (path, query, handlers) {
  const ctl = { stopped: false, abort: null };
  const accept = handlers.table ? IP.TABLE : undefined;
  let columns = [];
  const qs = (extra) => {
    const p = new URLSearchParams(query || {});
    if (handlers.table) p.set("includeObject", "None");
    for (const [k, v] of Object.entries(extra)) p.set(k, v);
    return "?" + p.toString();
  };
  async function run() {
    let delay = 500;
    while (!ctl.stopped) {
      try {
        const list = await IP.request("GET", path + qs({}), undefined, undefined, accept);
        if (ctl.stopped) return;
        if (handlers.table) columns = list.columnDefinitions || [];
        handlers.sync(handlers.table ? IP.tableRows(list, columns) : list.items || []);
        delay = 500;
        if (handlers.pollSeconds) {
          await new Promise((r) => { ctl.wake = r; setTimeout(r, handlers.pollSeconds * 1000); });
          continue;
        }
        await watch(list.metadata.resourceVersion);
      } catch (err) {
        if (ctl.stopped) return;
        if (handlers.error) handlers.error(err);
        if (err instanceof ApiError && (err.code === 401 || err.code === 403 || err.code === 404)) return;
      }
      // Back off before listing again (a server restarting, a network hiccup).
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 8000);
    }
  }
  async function watch(rv) {
    const ac = new AbortController();
    ctl.abort = ac;
    const res = await fetch(path + qs({ watch: "true", resourceVersion: rv, allowWatchBookmarks: "true" }),
      { headers: headers(accept ? { Accept: accept } : {}), signal: ac.signal });
    if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || ctl.stopped) return;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const ev = JSON.parse(line);
        if (ev.type === "ERROR") { ac.abort(); return; } // expired: list again
        if (ev.type === "BOOKMARK") continue;
        if (handlers.table) IP.tableRows(ev.object, columns).forEach((row) => handlers.event(ev.type, row));
        else handlers.event(ev.type, ev.object);
      }
    }
  }
  run().catch((err) => handlers.error && handlers.error(err));
  return () => { ctl.stopped = true; if (ctl.abort) ctl.abort.abort(); if (ctl.wake) ctl.wake(); };
};

/** Whether the user may do a verb (SelfSubjectAccessReview): RBAC's own answer, so the page offers
 * only what the server would allow. */
IP.can = async function (verb, group, resource, namespace, name, subresource) {
  try {
    const review = await IP.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
      apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview",
      spec: { resourceAttributes: { verb, group, resource, namespace, name, subresource } },
    });
    return !!(review.status && review.status.allowed);
  } catch (e) { return false; }
};

/** Who the credentials belong to (SelfSubjectReview), or an ApiError. */
IP.whoami = async function () {
  const review = await IP.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" });
  return review.status.userInfo;
};

IP.signOut = function (message) {
  IP.setToken("");
  IP.user = null;
  if (IP.currentPage === "login") return; // the login page says why itself
  IP.loginMessage = message || "";
  location.hash = "#/login";
};

/** Load a script of the console once (xterm.js only where a terminal is shown: the other pages start
 * without parsing it). */
const loaded = {};
IP.loadScript = (src) => (loaded[src] = loaded[src] || new Promise((resolve, reject) => {
  const el = document.createElement("script");
  el.src = src;
  el.onload = resolve;
  el.onerror = () => reject(new Error("could not load " + src));
  document.head.appendChild(el);
}));

/** HTML escaping for text put into markup. */
IP.esc = (s) => String(s === undefined || s === null ? "" : s)
  .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");

let cleanup = null;
/** End the current page: its watches and timers. */
IP.leave = function () {
  if (cleanup) { try { cleanup(); } catch (e) { /* a page's leftovers */ } cleanup = null; }
};
/** Show the page the location's hash names: #/page/arg/arg. */
IP.route = async function () {
  IP.leave();
  const parts = (location.hash.replace(/^#\/?/, "") || "fleet").split("/").map(decodeURIComponent);
  let name = parts[0];
  const main = document.getElementById("main");
  if (name !== "login" && !IP.user) {
    try { IP.user = await IP.whoami(); } catch (e) {
      if (!IP.loginMessage && IP.token()) IP.loginMessage = e.message;
      IP.afterLogin = location.hash;
      history.replaceState(null, "", "#/login");
      name = "login";
    }
  }
  if (!IP.pages[name]) name = "fleet";
  IP.currentPage = name;
  const page = IP.pages[name];
  document.getElementById("top").hidden = name === "login";
  document.getElementById("who").textContent = IP.user ? IP.user.username : "";
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.page === name);
  main.innerHTML = "";
  cleanup = (await page(main, parts.slice(1))) || null;
};
