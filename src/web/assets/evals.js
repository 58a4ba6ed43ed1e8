// evals.js: the /evals page (evalsPage in src/web/html.ts): each eval run, newest first, with its
// resolved of total, cost, cost per resolved, pass@1, best-of-K (n/a where no verify judged its
// candidates) and pass@K and when it started, refreshed every 5 s. Needs window.PB (transcript.js, loaded first); reads /api/evals and fills #rows and
// #note. Data reaches the DOM through textContent only; a run's link is built here (/evals/<name>).
(function () {
  "use strict";
  var el = PB.el;
  var cell = PB.cell;
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  function pct(x) {
    return x == null ? "n/a" : Math.round(1000 * Number(x)) / 10 + "%";
  }
  function row(r) {
    var tr = el("tr");
    tr.setAttribute("data-eval", r.name);
    var a = el("a", null, r.name);
    a.href = "/evals/" + encodeURIComponent(r.name);
    cell(tr, "run", null, null, r.name).appendChild(a);
    cell(tr, "model", null, r.model, r.model);
    cell(tr, "resolved", "num", r.resolved + " / " + r.total);
    cell(tr, "cost", "num spend", PB.usd(r.costUsd));
    var per = cell(tr, "per-resolved", "num", r.costPerResolvedUsd == null ? "n/a" : PB.usd(r.costPerResolvedUsd));
    per.setAttribute("data-label", "per resolved");
    cell(tr, "pass1", "num", pct(r.passAt1)).setAttribute("data-label", "pass@1");
    cell(tr, "bestk", "num", pct(r.bestOfK)).setAttribute("data-label", "best-of-" + r.candidates);
    cell(tr, "passk", "num", pct(r.passAtK)).setAttribute("data-label", "pass@" + r.candidates);
    cell(tr, "started", "num", new Date(r.startedAt).toLocaleString());
    return tr;
  }
  function load() {
    fetch("/api/evals", { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        var frag = document.createDocumentFragment();
        data.evals.forEach(function (r) {
          frag.appendChild(row(r));
        });
        tbody.textContent = "";
        tbody.appendChild(frag);
        note.textContent = data.evals.length
          ? PB.count(data.evals.length, "eval run")
          : "no eval runs (patchbay eval run SET --name NAME)";
      })
      .catch(function (err) {
        note.textContent = "could not load the eval runs: " + err.message;
      })
      .then(function () {
        setTimeout(load, 5000);
      });
  }
  load();
})();
