// Where the reader is: a "Newest ↓" button while they are scrolled up from the newest message
// (chat.js marks <html> "scrolled-up" as it decides whether to follow new messages), and the
// message in view kept when they switch between "Everything" and "What the model sees".
(function () {
  "use strict";

  function scrolledUp() { return document.documentElement.classList.contains("scrolled-up"); }

  // A conversation's page opens on its newest messages (chat.js scrolls there when it is
  // ready). The browser's own restoring of a reloaded page's scroll comes later, after the load,
  // and on a phone it may land a few hundred pixels up, the newest message below the composer.
  if (document.getElementById("chat-root")) history.scrollRestoration = "manual";

  // --- Newest ↓ ---------------------------------------------------------------------------------

  // Something new arrived below while the person reads above: say so once (the button is there).
  function noteArrival(e) {
    var status = document.getElementById("newest-status");
    var frame = typeof e.detail.message === "string" ? e.detail.message : "";
    if (status && scrolledUp() && /beforeend:#transcript/.test(frame)) {
      status.textContent = "New messages below. Newest goes to them.";
    }
  }

  // At the end again, by any way: the next arrival below is news again.
  function noteScroll() {
    var status = document.getElementById("newest-status");
    if (status && status.textContent && !scrolledUp()) status.textContent = "";
  }

  // Back to the end, where chat.js follows new messages again. The button goes away with the
  // scroll: the focus goes to the newest message, to read on from there.
  function toNewest() {
    window.scrollTo(0, document.body.scrollHeight);
    var messages = document.querySelectorAll("#transcript .message");
    var last = messages[messages.length - 1];
    if (!last) return;
    last.setAttribute("tabindex", "-1");
    last.focus({ preventScroll: true });
  }

  // --- The view switch --------------------------------------------------------------------------
  // The two views hold different lists: the transcript has every message (those before the
  // window's first kept message are outside it), the model view has the summary first and then
  // the kept messages. Both end on the newest, so a message is matched by its place from the end.

  var anchor = null; // {summary, fromEnd, top}: the message at the top of the view left
  var awaitingModelView = false;

  function header() { var h = document.querySelector(".chat-header"); return h ? h.getBoundingClientRect().bottom : 0; }

  function firstKept() {
    var ctx = document.getElementById("context");
    return parseInt((ctx && ctx.dataset.firstKept) || "1", 10);
  }
  function keptInTranscript() {
    var limit = firstKept();
    return Array.prototype.filter.call(document.querySelectorAll("#transcript .message[data-seq]"),
      function (m) { return parseInt(m.dataset.seq, 10) >= limit; });
  }
  function keptInModelView() {
    return Array.prototype.slice.call(document.querySelectorAll("#model-view .window-message:not([data-summary])"));
  }

  // The message being read: the first whose top is in view below the header, else the one the
  // header cuts (a message taller than the screen).
  function topMessage(list) {
    var line = header();
    var cut = -1;
    for (var i = 0; i < list.length; i++) {
      var box = list[i].getBoundingClientRect();
      if (box.top >= line - 1 && box.top < window.innerHeight) return i;
      if (cut < 0 && box.bottom > line) cut = i;
    }
    return cut;
  }

  function remember(toModelView) {
    var everything = !document.getElementById("transcript").hidden;
    if (everything === !toModelView) { anchor = null; return; } // the view shown already
    var all = everything ? Array.prototype.slice.call(document.querySelectorAll("#transcript .message[data-seq]"))
      : Array.prototype.slice.call(document.querySelectorAll("#model-view .window-message"));
    var i = topMessage(all);
    if (i < 0) { anchor = null; return; }
    var el = all[i];
    var kept = everything ? keptInTranscript() : keptInModelView();
    var k = kept.indexOf(el);
    anchor = { summary: k < 0, fromEnd: kept.length - 1 - k, top: el.getBoundingClientRect().top };
  }

  function lastOf(list) { return list[list.length - 1] || null; }

  function matchIn(modelView) {
    var kept = modelView ? keptInModelView() : keptInTranscript();
    if (anchor.summary) {
      return modelView ? document.querySelector("#model-view .window-message")
        : lastOf(document.querySelectorAll("#transcript .divider")) || kept[0];
    }
    return kept[Math.max(0, kept.length - 1 - anchor.fromEnd)] || null;
  }

  function restore(modelView) {
    if (!anchor) return;
    var el = matchIn(modelView);
    if (el) window.scrollBy(0, el.getBoundingClientRect().top - anchor.top);
  }

  function switchOf(e) { return e.target.closest("#show-everything, #show-model-view"); }

  // Capture phase: before chat.js swaps the views. The model view is fetched afresh on each
  // switch to it: placed now on what it held, and again when its new content is in.
  function beforeSwitch(e) {
    var button = switchOf(e);
    if (!button) return;
    var toModelView = button.id === "show-model-view";
    remember(toModelView);
    awaitingModelView = toModelView && !!anchor;
  }
  function onClick(e) {
    var button = switchOf(e);
    if (button) restore(button.id === "show-model-view");
    if (e.target.closest("#to-newest")) toNewest();
  }
  function modelViewLoaded(e) {
    if (!awaitingModelView || !e.detail.target || e.detail.target.id !== "model-view") return;
    awaitingModelView = false;
    restore(true);
  }

  document.addEventListener("click", beforeSwitch, true);
  document.addEventListener("click", onClick);
  document.addEventListener("htmx:afterSettle", modelViewLoaded);
  document.addEventListener("htmx:wsAfterMessage", noteArrival);
  // After chat.js's own scroll listener, which marks <html> "scrolled-up".
  window.addEventListener("scroll", noteScroll, { passive: true });
})();
