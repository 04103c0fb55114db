// The conversation list as a drawer on a phone's conversation page (static/css/reach.css): the
// header's ☰ opens it over the page, with the focus on its Close; Close, Esc, a tap outside it
// and choosing a conversation close it, and the focus goes back to ☰. It works as the Context
// drawer does (chat.js); a file of its own, as chat.js is full. On a desktop ☰ is not shown and
// nothing here happens.
(function () {
  "use strict";

  function toggle() { return document.getElementById("show-sidebar"); }
  function drawer() { return document.getElementById("sidebar"); }
  function root() { return document.getElementById("chat-root"); }
  function isOpen() { var r = root(); return !!r && r.classList.contains("sidebar-open"); }

  function open() {
    root().classList.add("sidebar-open");
    toggle().setAttribute("aria-expanded", "true");
    document.getElementById("hide-sidebar").focus();
  }
  function close(refocus) {
    if (!isOpen()) return;
    var hadFocus = drawer().contains(document.activeElement);
    root().classList.remove("sidebar-open");
    toggle().setAttribute("aria-expanded", "false");
    if (refocus || hadFocus) toggle().focus({ preventScroll: true });
  }

  // In the capture phase, before chat.js: a tap outside only closes the drawer (it does not also
  // press what was under it, half hidden by the drawer), and Esc closes the drawer rather than
  // stopping a streaming reply.
  document.addEventListener("click", function (e) {
    var t = e.target;
    if (t.closest("#show-sidebar")) { if (isOpen()) close(true); else open(); return; }
    if (!isOpen()) return;
    if (t.closest("#hide-sidebar")) { close(true); return; }
    // Choosing a conversation (a row, a search hit) leaves the page: closed, it is not found
    // open again on the way back.
    if (t.closest("#sidebar .sidebar-row > a, #sidebar .search-hit a")) { close(false); return; }
    if (!t.closest("#sidebar")) {
      e.preventDefault();
      e.stopPropagation();
      close(false);
    }
  }, true);

  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape" || !isOpen()) return;
    // A row's open menu closes first (chat.js), the drawer with the next Esc.
    if (drawer().querySelector("details.row-menu[open]")) return;
    e.preventDefault();
    e.stopPropagation();
    close(true);
  }, true);
})();
