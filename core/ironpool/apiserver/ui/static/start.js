/* Start: route on every change of the location's hash; sign out on request. */
"use strict";
window.addEventListener("hashchange", () => IP.route());
// Leaving the document (a reload, another address): end the page's watches at once, so their
// connections are free for the next document (a browser keeps six per server).
window.addEventListener("pagehide", () => IP.leave());
document.getElementById("signout").addEventListener("click", () => { IP.signOut(""); });
IP.route();
