// The message box grows with its text (up to half the screen, where the stylesheet caps it, and
// then scrolls), and a message's edit box sends with the same keys as the message box: Enter
// sends, Shift+Enter adds a line. Its own file: chat.js is at its size limit.
(function () {
  "use strict";

  function box() { return document.getElementById("message-input"); }

  // Sized to its text: "auto" first, so it can shrink as well as grow (after a send empties it).
  function fit() {
    var input = box();
    if (!input) return;
    var border = input.offsetHeight - input.clientHeight;
    input.style.height = "auto";
    input.style.height = input.scrollHeight + border + "px";
  }

  // The composer is sticky at the bottom: grown as the person types, it covers the newest
  // message, so a reader at the end stays at the end. Only then: on load the page may have been
  // taken to a linked message (chat.js), before the scroll that says so has been heard.
  function onInput(e) {
    if (e.target !== box()) return;
    var atEnd = !document.documentElement.classList.contains("scrolled-up");
    fit();
    if (atEnd) window.scrollTo(0, document.body.scrollHeight);
  }

  function sendEditOnEnter(e) {
    var field = e.target.closest ? e.target.closest(".edit-form textarea") : null;
    if (!field || e.key !== "Enter" || e.shiftKey || e.isComposing) return;
    e.preventDefault();
    if (field.value.trim()) field.form.requestSubmit();
  }

  document.addEventListener("input", onInput);
  document.addEventListener("keydown", sendEditOnEnter);
  // The box is emptied by chat.js when the server accepts the message, without an input event.
  document.addEventListener("htmx:wsAfterMessage", fit);
  document.addEventListener("DOMContentLoaded", fit);
  window.addEventListener("resize", fit);
})();
