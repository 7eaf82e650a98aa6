// awc console: a form with data-confirm asks before it is sent (a Cancel of
// a RUNNING job, a Discard: SPEC §22).
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var ask = event.target.getAttribute && event.target.getAttribute("data-confirm");
    if (ask && !window.confirm(ask)) { event.preventDefault(); }
  });
}());
// awc console: live refresh that a user can pause (SPEC §19). The page
// reloads every data-refresh seconds unless paused (kept per browser), the
// tab is hidden, or the user is typing in a field.
(function () {
  "use strict";
  var every = Number(document.body.getAttribute("data-refresh") || 0);
  var button = document.getElementById("refresh-toggle");
  if (!every || !button) { return; }
  var KEY = "awc-refresh-paused";
  function paused() { return window.localStorage.getItem(KEY) === "1"; }
  function show() {
    button.textContent = paused() ? "Resume refresh" : "Pause refresh";
    button.setAttribute("aria-pressed", paused() ? "true" : "false");
  }
  button.addEventListener("click", function () {
    window.localStorage.setItem(KEY, paused() ? "0" : "1");
    show();
  });
  show();
  window.setInterval(function () {
    var typing = document.activeElement && /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
    if (!paused() && !document.hidden && !typing) { window.location.reload(); }
  }, every * 1000);
}());
