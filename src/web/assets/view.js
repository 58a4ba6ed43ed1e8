// view.js: the static viewer's boot script (renderTranscriptHtml in src/web/html.ts, inlined after
// transcript.js): renders once the events, and the patch if there is one, that the page embeds as
// JSON in #pb-data ({ events, patch? }); sets data-rendered (the count) on <body> when done.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("pb-data").textContent);
  var diff = document.getElementById("diff");
  var t = new PB.Transcript(document.getElementById("transcript"), {
    totals: document.getElementById("totals"),
    onRendered: function (count, pending) {
      if (pending) return;
      if (typeof data.patch === "string") {
        diff.appendChild(PB.el("h2", null, "Patch"));
        diff.appendChild(data.patch ? PB.renderDiff(data.patch) : PB.el("div", "empty", "no changes"));
      }
      document.body.setAttribute("data-rendered", String(count));
    },
  });
  t.addAll(data.events);
})();
