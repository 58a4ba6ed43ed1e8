// batches.js: the /batches page (batchesPage in src/web/html.ts): progress, counts by status, spend
// and links to their jobs, refreshed every 3 s. Needs window.PB (transcript.js, loaded first);
// reads /api/batches and fills #rows and #note. Data reaches the DOM through textContent only.
(function () {
  "use strict";
  var el = PB.el;
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  var cell = PB.cell;
  function load() {
    fetch("/api/batches", { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        var frag = document.createDocumentFragment();
        data.batches.forEach(function (b) {
          var tr = el("tr");
          tr.setAttribute("data-batch-id", b.id);
          var a = el("a", null, b.id);
          a.href = "/jobs?batch=" + encodeURIComponent(b.id);
          var td = cell(tr, "batch", null, null, b.id);
          td.appendChild(a);
          if (b.cancelled) {
            td.appendChild(el("span", null, " "));
            td.appendChild(el("span", "badge s-cancelled", "cancelled"));
          }
          td = cell(tr, "progress", "progress");
          var bar = el("div", "bar");
          var fill = el("span");
          fill.style.width = (b.total ? Math.round((100 * b.done) / b.total) : 0) + "%";
          bar.appendChild(fill);
          td.appendChild(bar);
          td.appendChild(
            el(
              "span",
              "meta",
              b.done + " / " + b.total + " done · " + b.running + " running · " + b.waiting + " waiting",
            ),
          );
          td = cell(tr, "counts", "counts");
          td.setAttribute("data-label", "by status");
          Object.keys(b.byStatus)
            .sort()
            .forEach(function (k) {
              var s = el("a", "badge s-" + k, k + " " + b.byStatus[k]);
              s.href = "/jobs?batch=" + encodeURIComponent(b.id) + "&status=" + encodeURIComponent(k);
              td.appendChild(s);
              td.appendChild(document.createTextNode(" "));
            });
          cell(tr, "verified", "num", b.verified + " / " + (b.verified + b.unverified));
          cell(
            tr,
            "spend",
            "num spend",
            PB.usd(b.spentUsd) + (b.budgetUsd != null ? " of " + PB.usd(b.budgetUsd) : ""),
          );
          cell(tr, "submitted", "num", new Date(b.createdAt).toLocaleString());
          frag.appendChild(tr);
        });
        tbody.textContent = "";
        tbody.appendChild(frag);
        note.textContent = data.batches.length
          ? PB.count(data.batches.length, "batch", "batches")
          : "no batches (patchbay batch submit)";
      })
      .catch(function (err) {
        note.textContent = "could not load batches: " + err.message;
      })
      .then(function () {
        setTimeout(load, 3000);
      });
  }
  load();
})();
