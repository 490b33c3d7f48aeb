/* The login page: a bearer token, checked by the server (SelfSubjectReview) before it is kept for
 * this tab (sessionStorage); or the browser's client certificate, if it has one. */
"use strict";
IP.pages.login = function (main) {
  main.innerHTML = `
  <div class="card login">
    <h1>Sign in to ironpool</h1>
    <p class="muted">Your token decides what you see and may do (RBAC), as it does for <code>kubectl</code>.
    <code>ironpool token create NAME</code> makes one; <code>ironpool up</code> prints the administrator's.</p>
    <div id="login-error" class="error" hidden></div>
    <form id="login-form">
      <label>Bearer token<input id="token" type="password" autocomplete="off" autofocus></label>
      <button class="primary" id="login" type="submit">Sign in</button>
      <button id="login-cert" type="button">Use my client certificate</button>
    </form>
  </div>`;
  const error = main.querySelector("#login-error");
  const show = (msg) => { error.textContent = msg; error.hidden = !msg; };
  show(IP.loginMessage || "");
  IP.loginMessage = "";
  async function attempt(token) {
    IP.setToken(token);
    try {
      IP.user = await IP.whoami();
      const next = IP.afterLogin && IP.afterLogin !== "#/login" ? IP.afterLogin : "#/fleet";
      IP.afterLogin = "";
      location.hash = next;
    } catch (e) {
      IP.setToken("");
      IP.user = null;
      IP.loginMessage = "";
      show(token ? "That token was not accepted: " + e.message : "No client certificate was accepted: " + e.message);
    }
  }
  main.querySelector("#login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = main.querySelector("#token").value.trim();
    if (!t) { show("Enter a token."); return; }
    attempt(t);
  });
  main.querySelector("#login-cert").addEventListener("click", () => attempt(""));
};
