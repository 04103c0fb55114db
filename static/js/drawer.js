// The conversation list as a drawer on a phone (static/css/reach.css), on a conversation's page
// and on the home page: ☰ opens it over the page, with the focus on its Close; Close, Esc, a tap
// outside it and choosing a conversation close it, and the focus goes back to ☰. While it is
// open the page under it is inert and Tab goes round the drawer's own controls, as in a modal
// dialog. It works as the Context drawer does (chat.js); a file of its own, as chat.js is full.
// On a desktop ☰ is not shown and nothing here happens. Both drawers slide only as they open
// and close: the Context drawer's marking is here too, at the end.
(function () {
  "use strict";

  function toggle() { return document.getElementById("show-sidebar"); }
  function drawer() { return document.getElementById("sidebar"); }
  function root() { var t = toggle(); return t && t.closest(".drawer-layout"); }
  function isOpen() { var r = root(); return !!r && r.classList.contains("sidebar-open"); }

  // The rest of the page, out of reach of the keyboard, a pointer and a screen reader while the
  // drawer is open: the layout's other parts and what sits outside it (the skip link).
  function beside() {
    var layout = root();
    // Not a dialog: `?`'s list of shortcuts, opened over the drawer, is modal by itself.
    function other(el) { return el !== layout && el !== drawer() && el.tagName !== "DIALOG"; }
    return Array.prototype.filter.call(layout.children, other)
      .concat(Array.prototype.filter.call(document.body.children, other));
  }
  function setInert(on) { beside().forEach(function (el) { el.inert = on; }); }

  // Marked while it opens or closes, the only time it slides (reach.css).
  var sliding = 0;
  function slide() { sliding = mark(root(), sliding); }
  function mark(el, timer) {
    el.classList.add("sliding");
    clearTimeout(timer);
    return setTimeout(function () { el.classList.remove("sliding"); }, 300);
  }

  function open() {
    slide();
    root().classList.add("sidebar-open");
    toggle().setAttribute("aria-expanded", "true");
    setInert(true);
    document.getElementById("hide-sidebar").focus();
  }
  function close(refocus) {
    if (!isOpen()) return;
    var hadFocus = drawer().contains(document.activeElement);
    slide();
    root().classList.remove("sidebar-open");
    setInert(false);
    toggle().setAttribute("aria-expanded", "false");
    if (refocus || hadFocus) toggle().focus({ preventScroll: true });
  }

  // The drawer's controls a Tab can reach, in order (a closed row menu's links are not shown).
  function reachable() {
    var all = drawer().querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]");
    return Array.prototype.filter.call(all, function (el) {
      return !el.disabled && el.tabIndex >= 0 && el.checkVisibility({ visibilityProperty: true });
    });
  }
  function keepTabInside(e) {
    var list = reachable();
    if (!list.length) return;
    var first = list[0], last = list[list.length - 1];
    var inside = drawer().contains(document.activeElement);
    if (e.shiftKey && (!inside || document.activeElement === first)) { e.preventDefault(); last.focus(); }
    else if (!e.shiftKey && (!inside || document.activeElement === last)) { e.preventDefault(); first.focus(); }
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
    if (!isOpen()) return;
    if (e.key === "Tab") { keepTabInside(e); return; }
    if (e.key !== "Escape") return;
    // A row's open menu closes first (chat.js), the drawer with the next Esc.
    if (drawer().querySelector("details.row-menu[open]")) return;
    e.preventDefault();
    e.stopPropagation();
    close(true);
  }, true);

  // Wider than a phone (a turned tablet, a resized window) the list is beside the page again:
  // nothing of the drawer may stay behind (the page inert, ☰ saying it is open).
  window.addEventListener("resize", function () {
    var t = toggle();
    if (isOpen() && !t.checkVisibility()) close(false);
  });

  // The Context drawer (chat.js opens and closes it, app.css) slides the same way, only as it
  // opens or closes: marked as its open state changes, in the same frame, so a window narrowed
  // past a phone's width does not slide the panel out over the page.
  var chatRoot = document.getElementById("chat-root");
  var panelSliding = 0;
  if (chatRoot) {
    new MutationObserver(function (changes) {
      var was = changes[0].oldValue || "";
      if (/\bpanel-open\b/.test(was) !== chatRoot.classList.contains("panel-open")) {
        panelSliding = mark(chatRoot, panelSliding);
      }
    }).observe(chatRoot, { attributeFilter: ["class"], attributeOldValue: true });
  }
})();
