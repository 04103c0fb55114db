// Files in the composer (docs/files.md). The paperclip (a real file input), a drop on the
// page and a paste into the message box each upload a file at once, to
// POST /conversations/<id>/attachments/, and show it as a chip: its name, size and estimated
// tokens, and × (or Esc on it) to remove it, which deletes the upload. A refusal says why
// above the composer, where the person is looking, and leaves no chip. The send frame carries
// the chips' ids in their order; the chips clear once the server has stored the message (a
// refused message keeps them, as it keeps its text).
(function () {
  "use strict";

  var pastedImages = 0;
  var sending = null; // the ids the send on its way carries, until the server answers it

  function composer() { return document.getElementById("composer"); }
  function chipList() { return document.getElementById("chips"); }
  function chips() { return Array.prototype.slice.call(document.querySelectorAll("#chips > .chip")); }
  function uploaded() { return chips().filter(function (c) { return c.dataset.id; }); }
  function uploading() { return chips().some(function (c) { return !c.dataset.id; }); }

  // The token htmx sends with every request (base.html's hx-headers), for these fetches too.
  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }
  function post(url, body) {
    return fetch(url, { method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken() } });
  }

  // Sizes as the server says them (docs/files.md's refusals): decimal kB and MB.
  function shownSize(bytes) {
    if (bytes < 1000000) return Math.max(1, Math.round(bytes / 1000)) + " kB";
    return (bytes / 1000000).toFixed(1) + " MB";
  }
  function shownTokens(n) { return n.toLocaleString("en") + " token" + (n === 1 ? "" : "s"); }

  // --- What the person is told ----------------------------------------------------------------

  // A refusal in the notice above the composer (data-about="upload": the next upload or send
  // takes it away); what went well, read out by the status region only.
  function refuse(reason) {
    var notice = document.getElementById("notice");
    if (!notice) return;
    notice.textContent = reason;
    notice.className = "notice error";
    notice.dataset.about = "upload";
    notice.hidden = false;
  }
  function clearRefusal() {
    var notice = document.getElementById("notice");
    if (notice && notice.dataset.about === "upload") notice.hidden = true;
  }
  function tell(text) {
    var status = document.getElementById("files-status");
    if (status) status.textContent = text;
  }

  // --- Chips ----------------------------------------------------------------------------------

  // The message may be files alone: with a chip, the box may be left empty.
  function update() {
    var any = chips().length > 0;
    chipList().hidden = !any;
    document.getElementById("message-input").required = !any;
  }

  function part(className, text) {
    var span = document.createElement("span");
    span.className = className;
    span.textContent = text;
    return span;
  }

  function newChip(name) {
    var chip = document.createElement("li");
    chip.className = "chip uploading";
    chip.setAttribute("aria-busy", "true");
    var remove = document.createElement("button");
    remove.type = "button";
    remove.className = "chip-remove";
    remove.setAttribute("aria-label", "Remove " + name);
    remove.title = "Remove (Esc)";
    remove.textContent = "×";
    chip.append(part("chip-name", name), part("chip-about", "uploading…"), remove);
    chip.title = name;
    chipList().appendChild(chip);
    update();
    return chip;
  }

  function showUploaded(chip, file) {
    chip.dataset.id = String(file.id);
    chip.classList.remove("uploading");
    chip.removeAttribute("aria-busy");
    chip.querySelector(".chip-name").textContent = file.name;
    chip.querySelector(".chip-about").textContent = shownSize(file.bytes) + " · " + shownTokens(file.tokens);
    chip.querySelector(".chip-remove").setAttribute("aria-label", "Remove " + file.name);
    chip.title = file.name;
    tell("Attached " + file.name + ": " + shownSize(file.bytes) + ", about " + shownTokens(file.tokens) + ".");
  }

  function upload(file, name) {
    clearRefusal();
    var chip = newChip(name);
    var body = new FormData();
    body.append("file", file, name);
    post(composer().dataset.uploadUrl, body)
      .then(function (response) {
        return response.json().catch(function () { return null; })
          .then(function (data) { return { status: response.status, data: data }; });
      })
      .then(function (answer) {
        var kept = answer.status === 201 && answer.data;
        if (kept && chip.dataset.removed) forget(answer.data.id); // × while it uploaded
        else if (kept) showUploaded(chip, answer.data);
        else refused(chip, answer.data && answer.data.error ? named(answer.data.error, name)
          : "“" + name + "” was not attached (error " + answer.status + "). Reload the page and try again.");
      }, function () {
        refused(chip, "“" + name + "” was not attached: the connection failed. Try again.");
      });
  }

  // A reason names its file, or says "This upload" (a body refused before it was read): with
  // several files on their way, which one is said.
  function named(reason, name) {
    return reason.indexOf(name) === -1 ? "“" + name + "”: " + reason : reason;
  }

  function refused(chip, reason) {
    if (chip.dataset.removed) return; // taken off while it uploaded: nothing to say
    chip.remove();
    update();
    refuse(reason);
  }

  function fileUrl(id, pattern) { return pattern.replace("/0/", "/" + id + "/"); }

  // The upload deleted on the server: it was never sent, and must not count against the next
  // message's files. Failing, it is swept within a day; the chip is gone either way (a 404: gone
  // already; a 400: another tab sent it, and it stays with that message).
  function forget(id) {
    post(fileUrl(id, composer().dataset.removeUrl)).then(function (response) {
      if (response.status >= 500 || response.status === 403) {
        refuse("The file was taken off this message, but the server could not delete it (error " +
          response.status + "): it is deleted within a day.");
      }
    }, function () { /* offline: swept within a day */ });
  }

  // × or Esc: the chip goes, the focus to its neighbour's ×, else to the message box.
  function removeChip(chip) {
    var next = chip.nextElementSibling || chip.previousElementSibling;
    var name = chip.querySelector(".chip-name").textContent;
    chip.dataset.removed = "1";
    chip.remove();
    if (chip.dataset.id) forget(chip.dataset.id);
    update();
    clearRefusal();
    tell("Removed " + name + ".");
    (next ? next.querySelector(".chip-remove") : document.getElementById("message-input")).focus();
  }

  // --- Where files come from ------------------------------------------------------------------

  function uploadAll(files, nameOf) {
    Array.prototype.forEach.call(files, function (file) { upload(file, nameOf(file)); });
  }
  function ownName(file) { return file.name || "file"; }

  // A screenshot pasted comes as "image.png" (or nameless): it is named for where it came from.
  var EXTENSIONS = { "image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp" };
  function pastedName(file) {
    if (!/^image\//.test(file.type) || (file.name && !/^image\.\w+$/.test(file.name))) return ownName(file);
    pastedImages += 1;
    var extension = EXTENSIONS[file.type] || file.type.slice(6);
    return "pasted-image" + (pastedImages > 1 ? "-" + pastedImages : "") + "." + extension;
  }

  function onChange(e) {
    if (e.target.id !== "attach-input") return;
    uploadAll(e.target.files, ownName);
    e.target.value = ""; // the same file may be chosen again
  }

  // A paste with files uploads them; its text, if it has any, is pasted as usual.
  function onPaste(e) {
    if (!e.target.closest || !e.target.closest("#composer") || !e.clipboardData) return;
    var files = e.clipboardData.files;
    if (!files || !files.length) return;
    if (!e.clipboardData.getData("text/plain")) e.preventDefault();
    uploadAll(files, pastedName);
  }

  // A drop anywhere on a conversation's page goes with the next message: one a little off target
  // must not open the file in place of the page (and lose the text typed). A file field (the
  // sidebar's import) takes its own drop.
  function carriesFiles(e) {
    return !!e.dataTransfer && Array.prototype.indexOf.call(e.dataTransfer.types || [], "Files") !== -1;
  }
  function onChat(e) {
    return !!composer() && !(e.target.closest && e.target.closest("input[type=file]"));
  }
  function dropping(on) {
    var area = document.querySelector(".composer-area");
    if (area) area.classList.toggle("dropping", on);
  }
  function onDragOver(e) {
    if (!onChat(e) || !carriesFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = "copy";
    dropping(true);
  }
  function onDragLeave(e) { if (!e.relatedTarget) dropping(false); } // out of the window
  function onDrop(e) {
    dropping(false);
    if (!onChat(e) || !carriesFiles(e)) return;
    e.preventDefault();
    uploadAll(e.dataTransfer.files, ownName);
    document.getElementById("message-input").focus();
  }

  function onClick(e) {
    var remove = e.target.closest && e.target.closest("#chips .chip-remove");
    if (remove) removeChip(remove.closest(".chip"));
  }

  // Before chat.js's listeners (capture): Esc on a chip removes it rather than stop a reply.
  function onKeydown(e) {
    var chip = e.key === "Escape" && e.target.closest && e.target.closest("#chips .chip");
    if (!chip) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    removeChip(chip);
  }

  // --- Sending --------------------------------------------------------------------------------

  // Before chat.js's listener (capture), which holds the composer until the server answers: a
  // send while a file still uploads waits (said), else the frame carries the chips' ids.
  function onWsConfigSend(e) {
    var form = e.detail.elt && e.detail.elt.closest ? e.detail.elt.closest("form") : null;
    if (!form || form.id !== "composer") return;
    if (uploading()) {
      e.preventDefault();
      e.stopImmediatePropagation();
      refuse("A file is still uploading: send once its chip shows its size.");
      return;
    }
    var ids = uploaded().map(function (c) { return parseInt(c.dataset.id, 10); });
    if (ids.length) e.detail.parameters.attachments = ids;
    sending = ids;
    clearRefusal();
  }

  // A chip whose file shows in a message of the transcript was sent: from another tab, or by a
  // send whose answer a dropped socket lost (the transcript fetched again shows it).
  function dropSent() {
    var transcript = document.getElementById("transcript");
    var pattern = composer() && composer().dataset.fileUrl;
    if (!transcript || !pattern) return;
    var sent = uploaded().filter(function (c) {
      return transcript.querySelector('a.file-card[href="' + fileUrl(c.dataset.id, pattern) + '"]');
    });
    sent.forEach(function (c) { c.remove(); });
    if (sent.length) update();
  }

  // Stored (the frame that says so, as chat.js reads it): the files sent leave the composer.
  function onWsAfterMessage(e) {
    var frame = e.detail && typeof e.detail.message === "string" ? e.detail.message : "";
    dropSent();
    if (sending === null) return;
    if (frame.indexOf('id="send-accepted"') !== -1) {
      var sent = sending.map(String);
      uploaded().forEach(function (c) { if (sent.indexOf(c.dataset.id) !== -1) c.remove(); });
      sending = null;
      update();
    } else if (/id="notice"[^>]*data-about="send"/.test(frame)) {
      sending = null; // refused: the chips stay, as the text does
    }
  }

  document.addEventListener("change", onChange);
  document.addEventListener("paste", onPaste);
  document.addEventListener("dragover", onDragOver);
  document.addEventListener("dragleave", onDragLeave);
  document.addEventListener("drop", onDrop);
  document.addEventListener("click", onClick);
  document.addEventListener("keydown", onKeydown, true);
  document.addEventListener("htmx:wsConfigSend", onWsConfigSend, true);
  document.addEventListener("htmx:wsAfterMessage", onWsAfterMessage);
  document.addEventListener("htmx:load", dropSent);
})();
