// Small behaviours htmx does not cover: keyboard, auto-scroll, window markers, copy buttons,
// confirmations, the model-view toggle and recovering from a dropped socket.
(function () {
  "use strict";

  function root() { return document.getElementById("chat-root"); }

  // A form with data-confirm asks first. Here rather than in an onsubmit attribute: the
  // Content-Security-Policy runs no inline handlers. Capture phase, so a "no" stops the
  // submit before any other listener (htmx's included) sees it.
  document.addEventListener("submit", function (e) {
    var form = e.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }, true);

  // --- The title and Rename (issue 30, point 7) --------------------------------------------
  // Rename with the title as it was changes nothing: say so where the person is looking, and
  // leave the box, rather than reload the page to the same title as if nothing happened.
  document.addEventListener("submit", function (e) {
    var form = e.target.closest("form.rename");
    if (!form) return;
    var input = form.querySelector("#title-input");
    var status = form.querySelector("#rename-status");
    if (input.value.trim().replace(/\s+/g, " ") !== input.defaultValue) return;
    e.preventDefault();
    input.value = input.defaultValue;
    input.blur();
    if (status) status.textContent = "Unchanged";
    setTimeout(function () { if (status) status.textContent = ""; }, 4000);
  });

  // An import can take a while (a large export): say so, and do not let it be sent twice.
  document.addEventListener("submit", function (e) {
    var form = e.target.closest(".import-form");
    if (!form) return;
    form.classList.add("importing");
    form.querySelector("button[type=submit]").disabled = true;
  });

  // Enter sends, Shift+Enter adds a line, Esc stops a streaming reply.
  document.addEventListener("keydown", function (e) {
    var input = document.getElementById("message-input");
    if (e.target === input && e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (input.value.trim()) input.form.requestSubmit();
    } else if (e.key === "Escape" && (closeMenu() || closeResults(true) || closePanel(true))) {
      e.preventDefault(); // Esc closes an open menu first; a second Esc stops the reply
    } else if (e.key === "Escape" && document.querySelector('.message[data-status="streaming"]')) {
      e.preventDefault();
      document.getElementById("stop-form").requestSubmit();
    }
  });

  document.addEventListener("htmx:wsAfterSend", function (e) {
    var form = e.detail.elt && e.detail.elt.closest ? e.detail.elt.closest("form") : null;
    if (form && form.id === "compact-form") form.reset();
  });

  // The composer keeps its text until the server says it has stored the message (it may be
  // queued behind the reply in progress, never refused for being early); a refused message
  // stays there to be fixed. One send at a time, so a double Enter does not send it twice.
  var pendingText = null;
  function composerDone() {
    pendingText = null;
    var form = document.getElementById("composer");
    if (form) form.classList.remove("sending");
  }
  document.addEventListener("htmx:wsConfigSend", function (e) {
    var form = e.detail.elt && e.detail.elt.closest ? e.detail.elt.closest("form") : null;
    if (!form || form.id !== "composer") return;
    if (pendingText !== null) { e.preventDefault(); return; }
    pendingText = document.getElementById("message-input").value;
    form.classList.add("sending");
  });
  document.addEventListener("htmx:wsAfterMessage", function (e) {
    if (pendingText === null) return;
    var text = e.detail && typeof e.detail.message === "string" ? e.detail.message : "";
    if (text.indexOf('id="send-accepted"') !== -1) {
      var input = document.getElementById("message-input");
      if (input && input.value === pendingText) input.value = "";
      var notice = document.getElementById("notice");
      if (notice && notice.dataset.about === "send") notice.hidden = true; // the earlier refusal
      composerDone();
    } else if (/id="notice"[^>]*data-about="send"/.test(text)) {
      composerDone(); // refused: the text stays to be fixed
    }
  });

  // Stop names the reply it means: a second Stop that arrives after that reply ended must not
  // stop the queued one that started behind it.
  document.addEventListener("htmx:wsConfigSend", function (e) {
    var form = e.detail.elt && e.detail.elt.closest ? e.detail.elt.closest("form") : null;
    if (!form || form.id !== "stop-form") return;
    var streaming = document.querySelector('#transcript .message[data-status="streaming"]');
    if (!streaming) { e.preventDefault(); return; }
    e.detail.parameters.message = streaming.dataset.seq;
  });

  // Keep the view pinned to the bottom while the user is reading the newest message.
  var stickToBottom = true;
  window.addEventListener("scroll", function () {
    stickToBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  }, { passive: true });
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
      button.addEventListener("click", function () {
        var code = pre.querySelector("code") || pre;
        navigator.clipboard.writeText(code.innerText).then(function () {
          button.textContent = "Copied";
          setTimeout(function () { button.textContent = "Copy"; }, 1500);
        });
      });
      pre.appendChild(button);
    });
  }

  document.addEventListener("htmx:load", function (e) { addCopyButtons(e.target); });
  // The model view shows the window as it is now: refresh it whenever the panel changes.
  function refreshModelView() {
    var view = document.getElementById("model-view");
    if (view && !view.hidden) {
      htmx.ajax("GET", root().dataset.windowUrl, { target: "#model-view", swap: "innerHTML" });
    }
  }

  document.addEventListener("htmx:oobAfterSwap", function (e) {
    markWindow();
    scrollDown();
    var id = e.detail.target && e.detail.target.id;
    if (id === "context" || id === "context-figures") refreshModelView();
  });
  document.addEventListener("htmx:wsAfterMessage", function () { markWindow(); scrollDown(); });
  document.addEventListener("DOMContentLoaded", function () {
    addCopyButtons(document);
    markWindow();
    // A search hit links here as #msg-<seq>: show that message (marked by :target), not the end.
    var hit = location.hash && document.getElementById(location.hash.slice(1));
    if (hit) { stickToBottom = false; reveal(hit); }
    else window.scrollTo(0, document.body.scrollHeight);
  });

  // "Everything" / "What the model sees".
  document.addEventListener("click", function (e) {
    var everything = e.target.closest("#show-everything");
    var modelView = e.target.closest("#show-model-view");
    if (!everything && !modelView) return;
    document.getElementById("transcript").hidden = !!modelView;
    document.getElementById("model-view").hidden = !!everything;
    document.getElementById("show-everything").setAttribute("aria-pressed", String(!!everything));
    document.getElementById("show-model-view").setAttribute("aria-pressed", String(!!modelView));
  });

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
  document.addEventListener("htmx:wsClose", function () {
    var wasOpen = open;
    open = false;
    dropped = true;
    var banner = document.getElementById("connection");
    if (banner) banner.hidden = false;
    // Dropped because the server cannot reach Redis (its notice came just before): pages still
    // load, so show now what it stored (the message just sent, which no frame will bring). The
    // reply comes with the reconnect. Not again on each refused reconnect.
    if (wasOpen && layerNotice()) refetch(1);
  });
  document.addEventListener("htmx:wsOpen", function () {
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
  });

  // Frames to this conversation were lost while the server could not reach Redis (an outage too
  // short to drop this socket): fetch the transcript and panel again.
  document.addEventListener("htmx:wsAfterMessage", function (e) {
    var text = e.detail && typeof e.detail.message === "string" ? e.detail.message : "";
    if (text.indexOf('id="missed"') !== -1) refetch(3);
  });

  // A bubble or divider that arrives on the socket while the snapshot is loading would be
  // swapped away by it: when one does, fetch again (a few rounds at most). Streamed deltas do
  // not count: the reply's final render replaces its bubble whole.
  var refetching = false;
  var missed = false;
  document.addEventListener("htmx:wsAfterMessage", function (e) {
    var text = e.detail && typeof e.detail.message === "string" ? e.detail.message : "";
    if (refetching && /beforeend:#transcript|beforebegin:#msg-/.test(text)) missed = true;
  });
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
  document.addEventListener("click", function (e) {
    if (e.target.closest("#retry")) window.location.reload();
  });

  // A request from the transcript refused (a pin on a message that cannot be pinned): its
  // reason, sent as plain text, is said in the notice above the composer.
  document.addEventListener("htmx:responseError", function (e) {
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
  });

  // A boundary in the panel links to its divider, which may sit above the loaded page: load
  // older messages until it is there (a bounded number of pages), then scroll to it.
  document.addEventListener("click", function (e) {
    var link = e.target.closest('#context a[href^="#compaction-"]');
    if (!link) return;
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
  });

  // --- Keyboard and screen readers -------------------------------------------------------

  // The conversation menu (a <details>) closes on Esc, and focus goes back to its toggle.
  function closeMenu() {
    var menu = document.querySelector("details.conversation-menu[open]");
    if (!menu) return false;
    menu.open = false;
    menu.querySelector("summary").focus();
    return true;
  }

  // The skip link focuses its target itself: following the fragment only scrolls in some
  // browsers, and leaves "#message-input" in the address.
  document.addEventListener("click", function (e) {
    var link = e.target.closest("a.skip-link");
    if (!link) return;
    var target = document.getElementById(link.getAttribute("href").slice(1));
    if (!target) return;
    e.preventDefault();
    target.focus();
    target.scrollIntoView({ block: "nearest" });
  });

  // The transcript is a log: screen readers read a reply when its finished bubble replaces the
  // streaming one (which is aria-busy meanwhile). That a reply started is said once, here.
  var replying = false;
  function announceReply() {
    var now = !!document.querySelector('#transcript .message[data-status="streaming"]');
    if (now === replying) return;
    replying = now;
    var status = document.getElementById("reply-status");
    if (status) status.textContent = now ? "The assistant is replying. Press Escape to stop." : "";
  }
  document.addEventListener("htmx:wsAfterMessage", announceReply);
  document.addEventListener("DOMContentLoaded", function () {
    replying = !!document.querySelector('#transcript .message[data-status="streaming"]');
  });

  // "Load older messages" keeps the focus: htmx moves it to the next page's button (same id);
  // after the oldest page there is none, so it goes to the oldest message, to read on from.
  var loadingOlder = false;
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt && e.detail.elt.id === "load-older") loadingOlder = document.activeElement === e.detail.elt;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!loadingOlder) return;
    loadingOlder = false;
    if (document.activeElement && document.activeElement !== document.body) return;
    var first = document.querySelector("#transcript .message, #transcript .divider > summary");
    if (!first) return;
    if (first.tagName === "ARTICLE") first.setAttribute("tabindex", "-1");
    first.focus();
  });

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

  // The header's search: its results drop down under the box and take the focus (their
  // heading says how many); Esc or "Close the results" empties them and goes back to the box.
  document.addEventListener("htmx:afterSwap", function (e) {
    var target = e.detail.target;
    if (!target || (target.id !== "conversation-results" && target.id !== "sidebar-results")) return;
    var heading = target.querySelector(".search-count");
    if (heading) heading.focus();
  });
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
  // A click anywhere else closes them too, as a drop-down does: they cover the transcript.
  document.addEventListener("click", function (e) {
    if (e.target.closest("#close-results")) closeResults(false);
    else if (!e.target.closest(".chat-header .search-box, #conversation-results")) closeResults(false, true);
  });

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
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    if (!e.detail.target || e.detail.target.id !== "review") return;
    var id = draftId();
    newDraft = newDraft || (id !== null && id !== shownDraft);
    shownDraft = id;
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (!newDraft) return;
    newDraft = false;
    showDraft(!document.activeElement || !document.activeElement.closest("#composer"));
  });
  function showDraft(focus) {
    var heading = document.getElementById("review-heading");
    if (!heading) return;
    stickToBottom = false;
    reveal(document.getElementById("review"));
    if (focus) heading.focus({ preventScroll: true });
  }
  document.addEventListener("DOMContentLoaded", function () { shownDraft = draftId(); });
  document.addEventListener("click", function (e) {
    if (!e.target.closest("#review-waiting a.to-review")) return;
    e.preventDefault();
    showDraft(true);
  });

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
  document.addEventListener("click", function (e) {
    if (e.target.closest("#show-panel")) { if (panelOpen()) closePanel(true); else openPanel(); }
    else if (e.target.closest("#hide-panel")) closePanel(true);
    else if (panelOpen() && !e.target.closest("#side-panel")) closePanel(false);
  });
  document.addEventListener("submit", function (e) {
    if (e.target.id === "compact-form") closePanel(true);
  });
})();
