// Extended thinking: a reply's thinking stays open where the person opened it. The reply's bubble
// is replaced whole between tool steps and when it ends (render/bubbles.py), which would fold it
// again under their eyes; its thinking blocks keep their order, so each takes its state from the
// one it replaces (the block that streamed becomes that step's block).
(function () {
  "use strict";

  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var target = e.detail.target;
    var fragment = e.detail.fragment;
    if (!target || !fragment || !fragment.querySelectorAll) return;
    if (!target.matches || !target.matches("article.message")) return;
    var after = fragment.querySelectorAll("details.thinking");
    target.querySelectorAll("details.thinking").forEach(function (before, i) {
      if (before.open && after[i]) after[i].open = true;
    });
  });
})();
