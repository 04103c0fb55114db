// Notices where the person is looking. A refused import's reason (a 400 or a 429) is swapped in
// beside the sidebar's Import button, the page staying as it was (htmx leaves error answers out
// unless told); a notice the server rendered with the page (a form's "Settings saved.", an
// import's "Imported 3 conversations.") is said again once loaded, since a live region's first
// text is not read out.
(function () {
  "use strict";

  function importForm(e) {
    var elt = e.detail && e.detail.elt;
    return elt && elt.closest ? elt.closest(".import-form") : null;
  }

  document.addEventListener("htmx:beforeSwap", function (e) {
    if (!importForm(e)) return;
    var status = e.detail.xhr.status;
    if (status === 400 || status === 429) {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });

  document.addEventListener("htmx:beforeRequest", function (e) {
    if (!importForm(e)) return;
    document.getElementById("import-result").textContent = "";
  });

  // The form is ready again for another file, unless the answer leads to the new conversation.
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = importForm(e);
    if (!form || e.detail.xhr.getResponseHeader("HX-Redirect")) return;
    form.classList.remove("importing");
    form.querySelector("button[type=submit]").disabled = false;
    var result = form.querySelector("#import-result");
    if (!e.detail.successful && !result.textContent.trim()) {
      var status = e.detail.xhr.status;
      result.textContent = "Nothing was imported: " + (status
        ? "something went wrong on the server (error " + status + "). Try again."
        : "the server could not be reached. Try again.");
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var notice = document.getElementById("notice");
    if (!notice || notice.hidden || !notice.textContent.trim()) return;
    var text = notice.textContent;
    notice.textContent = "";
    setTimeout(function () { notice.textContent = text; }, 100);
  });
})();
