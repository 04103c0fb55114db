// The conversation sidebar (templates/chat/sidebar.html): its rows' menus, the notice with its
// Undo, where the focus goes after an action, and how many rows the list is drawn again with.
// Everything works without this file (plain forms, one page of the list); it makes it smooth.
// A file of its own: the sidebar is on every page, chat or not; its Esc is chat.js's.
(function () {
  "use strict";

  var LIST = "sidebar-conversations";

  function list() { return document.getElementById(LIST); }
  function inSidebar(elt) { return !!(elt && elt.closest && elt.closest(".sidebar")); }

  // --- the rows' menus --------------------------------------------------------------------
  // One open at a time; a click elsewhere closes it, and so does Esc (chat.js, where every Esc
  // is decided in order: a menu first, a streaming reply last).

  function openMenus() { return document.querySelectorAll("details.row-menu[open]"); }

  // `toggle` does not bubble: listen in the capture phase.
  document.addEventListener("toggle", function (e) {
    var menu = e.target;
    if (!menu.matches || !menu.matches("details.row-menu") || !menu.open) return;
    openMenus().forEach(function (other) { if (other !== menu) other.open = false; });
  }, true);

  document.addEventListener("click", function (e) {
    openMenus().forEach(function (menu) { if (!menu.contains(e.target)) menu.open = false; });
  });

  // --- the notice -------------------------------------------------------------------------
  // It stays about ten seconds (an Undo) or a few (a plain report), longer while the pointer or
  // the focus is on it, so nobody loses the Undo while reaching for it.

  var noticeTimer = null;
  function scheduleNotice() {
    clearTimeout(noticeTimer);
    var body = document.querySelector("#sidebar-notice .notice-body");
    if (!body) return;
    var seconds = parseInt(body.dataset.hideAfter || "10", 10);
    noticeTimer = setTimeout(function expire() {
      if (!body.isConnected) return;
      if (body.matches(":hover") || body.contains(document.activeElement)) {
        noticeTimer = setTimeout(expire, 2000);
        return;
      }
      clearNotice();
    }, seconds * 1000);
  }
  function clearNotice() {
    var region = document.getElementById("sidebar-notice");
    var hadFocus = region && region.contains(document.activeElement);
    if (region) region.textContent = "";
    if (hadFocus) focusList();
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest("#sidebar-notice .notice-dismiss")) clearNotice();
  });

  // A refusal (a 404 for a conversation deleted in another tab, a 400) is said in the notice.
  document.addEventListener("htmx:responseError", function (e) {
    if (!inSidebar(e.detail.elt)) return;
    var xhr = e.detail.xhr;
    var plain = (xhr.getResponseHeader("Content-Type") || "").indexOf("text/plain") === 0;
    var text = plain && xhr.responseText ? xhr.responseText : "That did not work (error " + xhr.status + "). Reload the page and try again.";
    showError(text);
  });
  document.addEventListener("htmx:sendError", function (e) {
    if (inSidebar(e.detail.elt)) showError("The server did not answer. Check the connection and try again.");
  });
  function showError(text) {
    var region = document.getElementById("sidebar-notice");
    if (!region) return;
    var body = document.createElement("div");
    body.className = "notice-body error";
    body.dataset.hideAfter = "20";
    body.tabIndex = -1;
    var span = document.createElement("span");
    span.className = "notice-text";
    span.textContent = text;
    var dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "link notice-dismiss";
    dismiss.setAttribute("aria-label", "Dismiss this notice");
    dismiss.textContent = "✕";
    body.appendChild(span);
    body.appendChild(dismiss);
    region.textContent = "";
    region.appendChild(body);
    scheduleNotice();
    if (!document.activeElement || document.activeElement === document.body) body.focus();
  }

  // --- drawing the list again -------------------------------------------------------------

  // An action draws the list again with as many rows as are on screen now (pages loaded by
  // scrolling included), so the row the user was at is still there.
  document.addEventListener("htmx:configRequest", function (e) {
    var target = e.detail.target;
    if (!target || target.id !== LIST || e.detail.verb !== "post") return;
    var current = list();
    e.detail.parameters.shown = current ? current.querySelectorAll(".sidebar-row").length : 0;
  });

  // Where the focus goes once the list is new: the same row's menu button (pin, unpin), else
  // the notice's Undo (delete, archive), else the notice; a keyboard "Load more" goes on to the
  // first row it added; the archived list and back, to its first link.
  var focusNext = null;
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (!inSidebar(elt) || !elt.closest) return;
    var form = elt.closest("form.row-actions");
    var wanted = null;
    if (form) wanted = { row: form.dataset.conversation };
    else if (elt.closest(".undo-form")) wanted = { row: elt.closest(".undo-form").dataset.conversation };
    else if (elt.classList.contains("load-more-conversations")) wanted = { after: elt.previousElementSibling };
    else if (elt.matches(".archived-link, .back-to-list")) wanted = { view: true };
    // Settling is told per new element: the request is known by its target.
    if (wanted) wanted.target = e.detail.target;
    focusNext = wanted;
  });
  // "Load more" moves the focus only if it had it when its page arrived (a keyboard user
  // tabbed to it; it may have started loading as it scrolled into view, before the focus came).
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (focusNext && focusNext.after !== undefined && e.detail.target === focusNext.target &&
        document.activeElement !== e.detail.target) focusNext = null;
  });
  document.addEventListener("htmx:afterSettle", function (e) {
    if (!focusNext || e.detail.target !== focusNext.target) return;
    var wanted = focusNext;
    focusNext = null;
    if (wanted.after !== undefined) {
      var rows = list() ? list().querySelectorAll(".sidebar-row > a") : [];
      for (var i = 0; i < rows.length; i++) {
        var after = wanted.after;
        // The first row below where the button was.
        if (!after || (!after.contains(rows[i]) && after.compareDocumentPosition(rows[i]) & Node.DOCUMENT_POSITION_FOLLOWING)) {
          rows[i].focus();
          return;
        }
      }
      return;
    }
    if (wanted.view) {
      var first = list() && list().querySelector("a, button, summary");
      if (first) first.focus();
      return;
    }
    var summary = wanted.row && document.querySelector("#sidebar-row-" + wanted.row + " .row-menu > summary");
    if (summary) { summary.focus(); return; }
    focusNotice();
  });
  // The notice arrives out of band: its own event.
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    if (e.detail.target && e.detail.target.id === "sidebar-notice") scheduleNotice();
  });

  function focusNotice() {
    var undo = document.querySelector("#sidebar-notice .undo");
    if (undo) { undo.focus(); return; }
    var body = document.querySelector("#sidebar-notice .notice-body");
    if (body) { body.tabIndex = -1; body.focus(); return; }
    focusList();
  }
  function focusList() {
    var first = list() && list().querySelector(".sidebar-row > a, .archived-link");
    if (first) first.focus();
  }

  // A notice that came with the page (the Undo after deleting the open conversation).
  document.addEventListener("DOMContentLoaded", scheduleNotice);
})();
