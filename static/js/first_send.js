// The first message of a conversation started on the home page (templates/chat/empty.html):
// its page opens with the message in the composer, marked `data-send-first`, and sends it as
// soon as the socket is open, by the composer's own submit, so it goes the way every message
// goes (chat.js keeps the text until the server stores it, and keeps it if it is refused).
// Without a socket it stays in the composer, nothing lost.
(function () {
  "use strict";

  document.addEventListener("htmx:wsOpen", function () {
    var form = document.querySelector("#composer[data-send-first]");
    if (!form) return;
    form.removeAttribute("data-send-first"); // once: a reconnect must not send it again
    var input = document.getElementById("message-input");
    if (input && input.value.trim()) form.requestSubmit();
  });
})();
