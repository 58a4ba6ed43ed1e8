// eval.js: the /evals/:name page (evalPage in src/web/html.ts): a run's summary (resolved of total
// as a bar, the instances by outcome, cost and cost per resolved, pass@1, best-of-K where a verify
// judged candidates, and pass@K, tokens, wall and harness time) and a row per instance (outcome,
// candidates resolved and the one its job picked, cost, tokens, harness time, links to its jobs), refreshed every 5 s while it runs. Needs window.PB (transcript.js,
// loaded first); takes the run's name from the page's path; reads /api/evals/:name. Data reaches
// the DOM through textContent only; a job's link is built here (/jobs/<id>).
(function () {
  "use strict";
  var el = PB.el;
  var cell = PB.cell;
  var name = decodeURIComponent(location.pathname.replace(/^\/evals\//, ""));
  var api = "/api/evals/" + encodeURIComponent(name);
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  var OUTCOMES = [
    ["resolved", "resolved"],
    ["unresolved", "unresolved"],
    ["emptyPatch", "empty patch"],
    ["error", "error"],
  ];
  document.title = "patchbay · eval " + PB.clean(name);
  document.getElementById("title").textContent = "Eval " + PB.clean(name);

  function pct(x) {
    return x == null ? "n/a" : Math.round(1000 * Number(x)) / 10 + "%";
  }
  function text(id, s) {
    document.getElementById(id).textContent = s;
  }

  function summary(v) {
    document.getElementById("resolvedbar").style.width = (v.total ? Math.round((100 * v.resolved) / v.total) : 0) + "%";
    text("resolved", v.resolved + " of " + PB.count(v.total, "instance") + " resolved");
    var box = document.getElementById("outcomes");
    box.textContent = "";
    OUTCOMES.forEach(function (o) {
      var b = el("span", "badge ev-" + o[0] + (v.counts[o[0]] ? "" : " zero"), o[1] + " " + v.counts[o[0]]);
      b.setAttribute("data-outcome", o[0]);
      box.appendChild(b);
      box.appendChild(document.createTextNode(" "));
    });
    text(
      "cost",
      "cost " +
        PB.usd(v.costUsd) +
        " · " +
        (v.costPerResolvedUsd == null ? "n/a" : PB.usd(v.costPerResolvedUsd)) +
        " per resolved instance",
    );
    text(
      "pass",
      "pass@1 " +
        pct(v.passAt1) +
        (v.bestOfK == null ? "" : " · best-of-" + v.candidates + " " + pct(v.bestOfK) + " (judged by verify)") +
        " · pass@" +
        v.candidates +
        " " +
        pct(v.passAtK),
    );
    text(
      "totals",
      "tokens " +
        PB.num(v.inputTokens) +
        " in / " +
        PB.num(v.outputTokens) +
        " out · wall " +
        PB.dur(v.wallMs) +
        " · harness " +
        PB.dur(v.harnessMs.median) +
        " median, " +
        PB.dur(v.harnessMs.total) +
        " in all",
    );
    text(
      "run",
      "model " +
        v.model +
        " · set " +
        v.set +
        " · batch " +
        v.batchId +
        " · started " +
        new Date(v.startedAt).toLocaleString(),
    );
  }

  function row(i) {
    var tr = el("tr");
    tr.setAttribute("data-instance", i.id);
    cell(tr, "instance", null, i.id, i.id);
    var td = cell(tr, "outcome");
    td.appendChild(
      el("span", "badge ev-" + String(i.outcome).replace(/[^a-z_]/g, ""), String(i.outcome).replace(/_/g, " ")),
    );
    var picked = i.picked == null ? "" : " (picked " + Number(i.picked) + ")";
    cell(tr, "candidates", "num", i.resolvedCandidates + " / " + i.candidates + picked).setAttribute(
      "data-label",
      "candidates resolved",
    );
    cell(tr, "cost", "num spend", PB.usd(i.costUsd));
    cell(tr, "tokens", "num", PB.num(i.inputTokens) + " / " + PB.num(i.outputTokens));
    cell(tr, "harness", "num", PB.dur(i.harnessMs));
    td = cell(tr, "jobs");
    i.jobIds.forEach(function (j) {
      var a = el("a", "job", j);
      a.href = "/jobs/" + encodeURIComponent(j);
      td.appendChild(a);
      td.appendChild(document.createTextNode(" "));
    });
    return tr;
  }

  function load() {
    fetch(api, { credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 404) throw new Error("no eval run " + name + " (removed after the retention?)");
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (v) {
        summary(v);
        var frag = document.createDocumentFragment();
        v.instances.forEach(function (i) {
          frag.appendChild(row(i));
        });
        tbody.textContent = "";
        tbody.appendChild(frag);
        note.textContent = v.instancesCut
          ? PB.count(v.instancesCut, "more instance") + " not shown (the run's files have them all)"
          : "";
      })
      .catch(function (err) {
        note.textContent = "could not load the eval run: " + err.message;
      })
      .then(function () {
        setTimeout(load, 5000);
      });
  }
  load();
})();
