// Small behaviours htmx does not cover: keyboard, auto-scroll, window markers, copy buttons,
// confirmations, the model-view toggle and recovering from a dropped socket. Each behaviour is a
// named function; the end of the file listens once per event type and calls them in order.
(function () {
  "use strict";

  function root() { return document.getElementById("chat-root"); }
  // The form an htmx websocket event is about, and the frame a message event brought.
  function formOf(e) { return e.detail.elt && e.detail.elt.closest ? e.detail.elt.closest("form") : null; }
  function frameOf(e) { return e.detail && typeof e.detail.message === "string" ? e.detail.message : ""; }

  // --- Forms ----------------------------------------------------------------------------------

  // A form with data-confirm asks first. Here rather than in an onsubmit attribute: the
  // Content-Security-Policy runs no inline handlers. Capture phase, so a "no" stops the
  // submit before any other listener (htmx's included) sees it.
  function confirmFirst(e) {
    var form = e.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }

  // Rename with the title as it was changes nothing: say so where the person is looking, and
  // leave the box, rather than reload the page to the same title as if nothing happened.
  function keepUnchangedTitle(e, form) {
    var input = form.querySelector("#title-input");
    var status = form.querySelector("#rename-status");
    if (input.value.trim().replace(/\s+/g, " ") !== input.defaultValue) return;
    e.preventDefault();
    input.value = input.defaultValue;
    input.blur();
    if (status) status.textContent = "Unchanged";
    setTimeout(function () { if (status) status.textContent = ""; }, 4000);
  }

  // An import can take a while (a large export): say so, and do not let it be sent twice.
  function showImporting(form) {
    form.classList.add("importing");
    form.querySelector("button[type=submit]").disabled = true;
  }

  // --- Sending --------------------------------------------------------------------------------

  // The composer keeps its text until the server says it has stored the message (it may be
  // queued behind the reply in progress, never refused for being early); a refused message
  // stays there to be fixed. One send at a time, so a double Enter does not send it twice.
  var pendingText = null;
  function composerDone() {
    pendingText = null;
    var form = document.getElementById("composer");
    if (form) form.classList.remove("sending");
  }
  function composerSending(e, form) {
    if (pendingText !== null) { e.preventDefault(); return; }
    pendingText = document.getElementById("message-input").value;
    form.classList.add("sending");
  }
  function composerAnswered(frame) {
    if (pendingText === null) return;
    if (frame.indexOf('id="send-accepted"') !== -1) {
      var input = document.getElementById("message-input");
      if (input && input.value === pendingText) input.value = "";
      var notice = document.getElementById("notice");
      if (notice && notice.dataset.about === "send") notice.hidden = true; // the refusal before
      composerDone();
    } else if (/id="notice"[^>]*data-about="send"/.test(frame)) {
      composerDone(); // refused: the text stays to be fixed
    }
  }

  // Stop names the reply it means: a second Stop that arrives after that reply ended must not
  // stop the queued one that started behind it.
  function nameTheReplyToStop(e) {
    var streaming = document.querySelector('#transcript .message[data-status="streaming"]');
    if (!streaming) { e.preventDefault(); return; }
    e.detail.parameters.message = streaming.dataset.seq;
  }

  // --- The transcript ---------------------------------------------------------------------------

  // Keep the view pinned to the bottom while the user is reading the newest message.
  var stickToBottom = true;
  function noteScroll() {
    stickToBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    document.documentElement.classList.toggle("scrolled-up", !stickToBottom); // for place.js
  }
  function scrollDown() { if (stickToBottom) window.scrollTo(0, document.body.scrollHeight); }

  // Messages before the latest boundary are outside the model's window: the context panel
  // carries that boundary and every swap of it re-marks the transcript.
  function markWindow() {
    var ctx = document.getElementById("context");
    if (!ctx) return;
    var firstKept = parseInt(ctx.dataset.firstKept || "1", 10);
    document.querySelectorAll("#transcript .message[data-seq]").forEach(function (el) {
      el.classList.toggle("outside-window", parseInt(el.dataset.seq, 10) < firstKept);
    });
  }

  function addCopyButtons(scope) {
    (scope || document).querySelectorAll(".markdown pre").forEach(function (pre) {
      if (pre.querySelector(".copy")) return;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.textContent = "Copy";
      pre.appendChild(button);
    });
  }
  function copyCode(button) {
    var pre = button.parentElement;
    var code = pre.querySelector("code") || pre;
    navigator.clipboard.writeText(code.innerText).then(function () {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    });
  }

  // The model view shows the window as it is now: refresh it whenever the panel changes.
  function refreshModelView() {
    var view = document.getElementById("model-view");
    if (view && !view.hidden) {
      htmx.ajax("GET", root().dataset.windowUrl, { target: "#model-view", swap: "innerHTML" });
    }
  }

  // "Everything" / "What the model sees".
  function showView(modelView) {
    document.getElementById("transcript").hidden = modelView;
    document.getElementById("model-view").hidden = !modelView;
    document.getElementById("show-everything").setAttribute("aria-pressed", String(!modelView));
    document.getElementById("show-model-view").setAttribute("aria-pressed", String(modelView));
  }

  // A search hit links here as #msg-<seq>: show that message (marked by :target), not the end.
  function showLinkedMessage() {
    var hit = location.hash && document.getElementById(location.hash.slice(1));
    if (hit) { stickToBottom = false; reveal(hit); }
    else if (root()) window.scrollTo(0, document.body.scrollHeight); // a conversation, not search
  }

  // --- A dropped socket -----------------------------------------------------------------------

  // Reconnect after a random wait of up to 1, 2, 4, then 8 seconds (htmx's own backoff grows
  // to 64 s: after an outage of a minute a page would sit on its banner half a minute more).
  htmx.config.wsReconnectDelay = function (retryCount) {
    return 1000 * Math.pow(2, Math.min(retryCount, 3)) * Math.random();
  };

  // A dropped socket: show the banner; htmx's ws extension reconnects by itself, and when it
  // does we re-fetch the transcript and panel so nothing is missed and nothing doubles.
  var dropped = false;
  var open = false;
  function layerNotice() {
    var notice = document.getElementById("notice");
    return notice && !notice.hidden && notice.dataset.about === "layer" ? notice : null;
  }
  function socketClosed() {
    var wasOpen = open;
    open = false;
    dropped = true;
    var banner = document.getElementById("connection");
    if (banner) banner.hidden = false;
    // Dropped because the server cannot reach Redis (its notice came just before): pages still
    // load, so show now what it stored (the message just sent, which no frame will bring). The
    // reply comes with the reconnect. Not again on each refused reconnect.
    if (wasOpen && layerNotice()) refetch(1);
  }
  function socketOpened() {
    open = true;
    var banner = document.getElementById("connection");
    if (banner) banner.hidden = true;
    if (!dropped) return;
    dropped = false;
    // A socket opens only with Redis reachable: live updates are not paused any more.
    var notice = layerNotice();
    if (notice) notice.hidden = true;
    composerDone(); // whether it arrived shows in the re-fetched transcript; the text stays
    refetch(3);
  }

  // Frames to this conversation were lost while the server could not reach Redis (an outage too
  // short to drop this socket): fetch the transcript and panel again.
  function refetchIfMissed(frame) {
    if (frame.indexOf('id="missed"') !== -1) refetch(3);
  }

  // A bubble or divider that arrives on the socket while the snapshot is loading would be
  // swapped away by it: when one does, fetch again (a few rounds at most). Streamed deltas do
  // not count: the reply's final render replaces its bubble whole.
  var refetching = false;
  var missed = false;
  function noteArrivalDuringRefetch(frame) {
    if (refetching && /beforeend:#transcript|beforebegin:#msg-/.test(frame)) missed = true;
  }
  function load(url, target) {
    return fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) { htmx.swap(target, html, { swapStyle: "outerHTML" }); });
  }
  function refetch(rounds) {
    var r = root();
    refetching = true;
    missed = false;
    Promise.all([load(r.dataset.transcriptUrl, "#transcript"), load(r.dataset.contextUrl, "#context")])
      .catch(function () { missed = true; })
      .finally(function () {
        refetching = false;
        markWindow();
        if (missed && rounds > 1) refetch(rounds - 1);
      });
  }

  // A request from the transcript refused (a pin on a message that cannot be pinned): its
  // reason, sent as plain text, is said in the notice above the composer.
  function sayRefusal(e) {
    var elt = e.detail.elt;
    if (!elt || !elt.closest || elt.closest(".sidebar")) return; // the sidebar says its own
    var notice = document.getElementById("notice");
    var xhr = e.detail.xhr;
    if (!notice) return;
    var plain = (xhr.getResponseHeader("Content-Type") || "").indexOf("text/plain") === 0;
    notice.textContent = plain && xhr.responseText ? xhr.responseText
      : "That did not work (error " + xhr.status + "). Reload the page and try again.";
    notice.className = "notice error";
    notice.removeAttribute("data-about");
    notice.hidden = false;
  }

  // --- Keyboard and screen readers ----------------------------------------------------------

  // The drop-down menus (a <details>: a sidebar row's, of which one is open at a time, before
  // the conversation's) close on Esc, and the focus goes back to the menu's toggle.
  function closeMenu() {
    var menu = document.querySelector("details.row-menu[open]") ||
      document.querySelector("details.conversation-menu[open]");
    if (!menu) return false;
    menu.open = false;
    menu.querySelector("summary").focus();
    return true;
  }

  // Enter sends (an empty box only with files to go alone: then it is not required), Shift+Enter
  // adds a line. Esc closes what is open (a menu, the results, the drawer), one at a time; with
  // nothing open, it stops a streaming reply.
  function onKeydown(e) {
    var input = document.getElementById("message-input");
    if (e.target === input && e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (input.value.trim() || !input.required) input.form.requestSubmit();
    } else if (e.key === "Escape" && (closeMenu() || closeResults(true) || closePanel(true))) {
      e.preventDefault();
    } else if (e.key === "Escape" && document.querySelector('.message[data-status="streaming"]')) {
      e.preventDefault();
      document.getElementById("stop-form").requestSubmit();
    }
  }

  // The skip link focuses its target itself: following the fragment only scrolls in some
  // browsers, and leaves "#message-input" in the address.
  function skipTo(e, link) {
    var target = document.getElementById(link.getAttribute("href").slice(1));
    if (!target) return;
    e.preventDefault();
    target.focus();
    target.scrollIntoView({ block: "nearest" });
  }

  // The transcript is a log: screen readers read a reply when its finished bubble replaces the
  // streaming one (which is aria-busy meanwhile). That a reply started is said once, here.
  var replying = false;
  function streamingNow() {
    return !!document.querySelector('#transcript .message[data-status="streaming"]');
  }
  function announceReply() {
    var now = streamingNow();
    if (now === replying) return;
    replying = now;
    var status = document.getElementById("reply-status");
    if (status) status.textContent = now ? "The assistant is replying. Press Escape to stop." : "";
  }

  // "Load older messages" keeps the focus: htmx moves it to the next page's button (same id);
  // after the oldest page there is none, so it goes to the oldest message, to read on from.
  var loadingOlder = false;
  function noteLoadingOlder(e) {
    if (e.detail.elt && e.detail.elt.id === "load-older") loadingOlder = document.activeElement === e.detail.elt;
  }
  function focusAfterOlder() {
    if (!loadingOlder) return;
    loadingOlder = false;
    if (document.activeElement && document.activeElement !== document.body) return;
    var first = document.querySelector("#transcript .message, #transcript .divider > summary");
    if (!first) return;
    if (first.tagName === "ARTICLE") first.setAttribute("tabindex", "-1");
    first.focus();
  }

  // --- In view: what a person triggers answers where they are looking ---------------------
  // The header (sticky at the top) and the composer (sticky at the bottom) cover the page's
  // edges: an element is shown in the room between them, whole if it fits, else from its top.
  // Their heights, not where they are now: at the top of the page the header is not stuck yet.

  function reveal(el) {
    var header = document.querySelector(".chat-header");
    var composer = document.querySelector(".composer-area");
    var top = (header ? header.offsetHeight : 0) + 8;
    var bottom = window.innerHeight - (composer ? composer.offsetHeight : 0) - 8;
    var box = el.getBoundingClientRect();
    var room = bottom - top;
    var offset = box.height > room ? box.top - top : box.top - top - (room - box.height) / 2;
    window.scrollBy(0, offset);
  }

  // A boundary in the panel links to its divider, which may sit above the loaded page: load
  // older messages until it is there (a bounded number of pages), then scroll to it.
  function goToDivider(e, link) {
    var id = link.getAttribute("href").slice(1);
    e.preventDefault();
    closePanel(false);
    var pages = 50;
    (function loadUntilFound() {
      var divider = document.getElementById(id);
      var older = document.querySelector("#transcript .load-older");
      if (divider) {
        divider.open = true;
        stickToBottom = false;
        reveal(divider);
        divider.querySelector("summary").focus({ preventScroll: true });
      } else if (older && pages-- > 0) {
        document.body.addEventListener("htmx:afterSettle", loadUntilFound, { once: true });
        htmx.trigger(older, "click");
      }
    })();
  }

  // The header's search: its results drop down under the box and take the focus (their
  // heading says how many); Esc or "Close the results" empties them and goes back to the box.
  function focusResults(e) {
    var target = e.detail.target;
    if (!target || (target.id !== "conversation-results" && target.id !== "sidebar-results")) return;
    var heading = target.querySelector(".search-count");
    if (heading) heading.focus();
  }
  // `byKey`: an Esc closes them only from the header (elsewhere it stops a reply). `away`: the
  // person clicked elsewhere, where the focus stays.
  function closeResults(byKey, away) {
    var results = document.getElementById("conversation-results");
    if (!results || !results.firstElementChild) return false;
    var header = results.closest(".chat-header");
    if (byKey && !header.contains(document.activeElement)) return false;
    var inside = header.contains(document.activeElement);
    results.textContent = "";
    if (!away && (inside || document.activeElement === document.body)) document.getElementById("search-conversation").focus();
    return true;
  }

  // A draft to review arrives under the newest message: the view moves to it. The focus goes to
  // its heading unless the person is typing a message (an automatic compaction's draft must
  // not take the message box from them: the notice above it says a draft waits, and leads
  // to it). After every swap of the frame, which scroll the page down as they go.
  var shownDraft = null;
  var newDraft = false;
  function draftId() {
    var field = document.querySelector('#review:not([hidden]) input[name="compaction"]');
    return field ? field.value : null;
  }
  function noteDraft(e) {
    if (!e.detail.target || e.detail.target.id !== "review") return;
    var id = draftId();
    newDraft = newDraft || (id !== null && id !== shownDraft);
    shownDraft = id;
  }
  function showNewDraft() {
    if (!newDraft) return;
    newDraft = false;
    showDraft(!document.activeElement || !document.activeElement.closest("#composer"));
  }
  function showDraft(focus) {
    var heading = document.getElementById("review-heading");
    if (!heading) return;
    stickToBottom = false;
    reveal(document.getElementById("review"));
    if (focus) heading.focus({ preventScroll: true });
  }

  // On a narrow screen the context panel is a drawer over the page, opened by the header's
  // "Context" button; Close, Esc, a tap outside it, a boundary link or Compact now close it
  // (the page under it shows what they did).
  function panelOpen() { var r = root(); return !!r && r.classList.contains("panel-open"); }
  function openPanel() {
    root().classList.add("panel-open");
    document.getElementById("show-panel").setAttribute("aria-expanded", "true");
    document.getElementById("hide-panel").focus();
  }
  function closePanel(refocus) {
    if (!panelOpen()) return false;
    var hadFocus = document.getElementById("side-panel").contains(document.activeElement);
    root().classList.remove("panel-open");
    var toggle = document.getElementById("show-panel");
    toggle.setAttribute("aria-expanded", "false");
    if (refocus || hadFocus) toggle.focus({ preventScroll: true });
    return true;
  }

  // --- Listening: one listener per event type, calling the behaviours above in order -----------

  function onClick(e) {
    var t = e.target;
    var view = t.closest("#show-everything, #show-model-view");
    if (view) showView(view.id === "show-model-view");
    if (t.closest("#retry")) window.location.reload();
    var boundary = t.closest('#context a[href^="#compaction-"]');
    if (boundary) goToDivider(e, boundary);
    var skip = t.closest("a.skip-link");
    if (skip) skipTo(e, skip);
    // A click anywhere else closes the results too, as a drop-down does: they cover the transcript.
    if (t.closest("#close-results")) closeResults(false);
    else if (!t.closest(".chat-header .search-box, #conversation-results")) closeResults(false, true);
    if (t.closest("#review-waiting a.to-review")) { e.preventDefault(); showDraft(true); }
    if (t.closest("#show-panel")) { if (panelOpen()) closePanel(true); else openPanel(); }
    else if (t.closest("#hide-panel")) closePanel(true);
    else if (panelOpen() && !t.closest("#side-panel")) closePanel(false);
    var copy = t.closest(".markdown pre > button.copy");
    if (copy) copyCode(copy);
  }

  function onSubmit(e) {
    var rename = e.target.closest("form.rename");
    if (rename) keepUnchangedTitle(e, rename);
    var upload = e.target.closest(".import-form");
    if (upload) showImporting(upload);
    if (e.target.id === "compact-form") closePanel(true);
  }

  function onLoad(e) { addCopyButtons(e.target); }

  function onReady() {
    addCopyButtons(document);
    markWindow();
    showLinkedMessage();
    replying = streamingNow();
    shownDraft = draftId();
  }

  function onWsConfigSend(e) {
    var form = formOf(e);
    if (form && form.id === "composer") composerSending(e, form);
    else if (form && form.id === "stop-form") nameTheReplyToStop(e);
  }

  function onWsAfterSend(e) {
    var form = formOf(e);
    if (form && form.id === "compact-form") form.reset();
  }

  function onWsAfterMessage(e) {
    var frame = frameOf(e);
    composerAnswered(frame);
    markWindow();
    scrollDown();
    refetchIfMissed(frame);
    noteArrivalDuringRefetch(frame);
    announceReply();
    showNewDraft();
  }

  function onOobAfterSwap(e) {
    markWindow();
    scrollDown();
    var id = e.detail.target && e.detail.target.id;
    if (id === "context" || id === "context-figures") refreshModelView();
    noteDraft(e);
  }

  window.addEventListener("scroll", noteScroll, { passive: true });
  document.addEventListener("submit", confirmFirst, true);
  document.addEventListener("submit", onSubmit);
  document.addEventListener("click", onClick);
  document.addEventListener("keydown", onKeydown);
  document.addEventListener("DOMContentLoaded", onReady);
  document.addEventListener("htmx:load", onLoad);
  document.addEventListener("htmx:beforeRequest", noteLoadingOlder);
  document.addEventListener("htmx:afterSwap", focusResults);
  document.addEventListener("htmx:afterSettle", focusAfterOlder);
  document.addEventListener("htmx:oobAfterSwap", onOobAfterSwap);
  document.addEventListener("htmx:responseError", sayRefusal);
  document.addEventListener("htmx:wsConfigSend", onWsConfigSend);
  document.addEventListener("htmx:wsAfterSend", onWsAfterSend);
  document.addEventListener("htmx:wsAfterMessage", onWsAfterMessage);
  document.addEventListener("htmx:wsOpen", socketOpened);
  document.addEventListener("htmx:wsClose", socketClosed);
})();
