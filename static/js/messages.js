// A message's time and its Copy (render/bubbles.py writes both): the time the server wrote in
// UTC is said again in the reader's own zone, and Copy puts the message's Markdown as stored (its
// <template class="message-source">, not the HTML shown) on the clipboard, saying "Copied" on the
// button and to a screen reader. Bubbles a turn streams in get the same, as they arrive.
(function () {
  "use strict";

  var SHORT = { hour: "2-digit", minute: "2-digit" };
  var DAY = { day: "numeric", month: "short" };
  var YEAR = { day: "numeric", month: "short", year: "numeric" };
  var FULL = { weekday: "long", day: "numeric", month: "long", year: "numeric", hour: "2-digit", minute: "2-digit" };

  function localTimes(scope) {
    (scope.querySelectorAll ? scope : document).querySelectorAll("time.sent-at:not([data-local])")
      .forEach(function (el) {
        var when = new Date(el.getAttribute("datetime"));
        if (isNaN(when)) return;
        var now = new Date();
        var time = when.toLocaleTimeString([], SHORT);
        var day = when.getFullYear() === now.getFullYear() ? DAY : YEAR;
        el.textContent = when.toDateString() === now.toDateString()
          ? time : when.toLocaleDateString([], day) + ", " + time;
        el.title = when.toLocaleString([], FULL);
        el.dataset.local = "";
      });
  }

  // One live region for every Copy, in the page from the start (a region added with its text
  // is not reliably read out, nor is a button's own text changing).
  function liveRegion() {
    var status = document.getElementById("copy-status");
    if (!status) {
      status = document.createElement("span");
      status.id = "copy-status";
      status.className = "visually-hidden";
      status.setAttribute("role", "status");
      document.body.appendChild(status);
    }
    return status;
  }

  function say(text) {
    var status = liveRegion();
    status.textContent = "";
    setTimeout(function () { status.textContent = text; }, 50);
  }

  function writeText(text) {
    if (navigator.clipboard && navigator.clipboard.writeText) return navigator.clipboard.writeText(text);
    // No Clipboard API (a page not served over https): the old way, from a selection.
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "visually-hidden";
      document.body.appendChild(area);
      area.select();
      var done = document.execCommand("copy");
      area.remove();
      if (done) resolve(); else reject(new Error("copy refused"));
    });
  }

  function copyMessage(button) {
    var source = button.closest(".message").querySelector(":scope > template.message-source");
    if (!source) return;
    writeText(source.content.textContent).then(function () {
      button.textContent = "Copied";
      say("Message copied as Markdown.");
      setTimeout(function () { button.textContent = "Copy"; }, 2000);
    }, function () {
      say("Could not copy: select the text and copy it instead.");
    });
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button.copy-message");
    if (button) copyMessage(button);
  });
  document.addEventListener("DOMContentLoaded", function () {
    liveRegion();
    localTimes(document);
  });
  document.addEventListener("htmx:load", function (e) { localTimes(e.target); });
})();
