// Keyboard shortcuts, and the list of them that `?` opens. The keys are those ChatGPT uses where
// the browser leaves them to the page: Ctrl/Cmd+Shift+O (a new chat), Ctrl/Cmd+K (search; the
// page may take it from the browser's own search), Shift+Esc (the message box; Chrome on Windows
// and Linux keeps it for its task manager, where the skip link does the same). "/" and "?" are
// plain keys, so only outside a text field, where they would be typed.
(function () {
  "use strict";

  function help() { return document.getElementById("keys-help"); }

  function typing(el) {
    return !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  function newChat() { return document.getElementById("new-conversation-form"); }

  function shown(el) { return !!el && el.checkVisibility(); }

  function focusSearch(all) {
    var everywhere = document.getElementById("search-all");
    var here = document.getElementById("search-conversation");
    var field = all && shown(everywhere) ? everywhere : here || everywhere;
    if (field) field.focus();
  }

  // Capture phase: before chat.js, whose Esc stops a streaming reply (an Esc that closes this
  // list, or Shift+Esc, must not).
  function onKeydown(e) {
    var list = help();
    var mod = e.ctrlKey || e.metaKey;
    var key = (e.key || "").toLowerCase(); // Chrome's autofill sends a keydown without a key
    var handled = true;
    if (list && list.open && e.key === "Escape") list.close();
    else if (e.key === "Escape" && e.shiftKey) { var input = document.getElementById("message-input"); if (input) input.focus(); }
    else if (mod && e.shiftKey && key === "o" && newChat()) newChat().requestSubmit();
    else if (mod && !e.shiftKey && key === "k") focusSearch(true);
    else if (typing(e.target) || mod || e.altKey) handled = false;
    else if (e.key === "/") focusSearch(false);
    else if (e.key === "?" && list) list.showModal();
    else handled = false;
    if (!handled) return;
    e.preventDefault();
    e.stopPropagation();
  }

  function onClick(e) { if (e.target.closest("#close-keys-help")) help().close(); }

  document.addEventListener("keydown", onKeydown, true);
  document.addEventListener("click", onClick);
})();
