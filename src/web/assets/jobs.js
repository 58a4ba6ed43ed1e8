// jobs.js: the /jobs page (jobsPage in src/web/html.ts): the list with its filters, refreshed every
// 2 s. Needs window.PB (transcript.js, loaded first); reads /api/jobs with the page's own query
// (state, status, batch, cursor) and fills #rows, #note and #pager. Data from the API reaches the
// DOM through textContent (PB.el) only.
(function () {
  "use strict";
  var el = PB.el;
  var q = new URLSearchParams(location.search);
  var form = document.getElementById("filters");
  ["state", "status", "batch"].forEach(function (k) {
    if (q.get(k) && form.elements[k]) form.elements[k].value = q.get(k);
  });
  form.addEventListener("change", function () {
    form.submit();
  });
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  var pager = document.getElementById("pager");
  function badge(s) {
    return el("span", "badge s-" + String(s).replace(/[^a-z_]/g, ""), s);
  }
  var cell = PB.cell;
  function link(text, href) {
    var a = el("a", null, text);
    a.href = href;
    return a;
  }
  var SHORT = { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" };
  function row(j) {
    var tr = el("tr");
    tr.setAttribute("data-job-id", j.id);
    cell(tr, "job", null, null, j.id).appendChild(link(j.id, "/jobs/" + encodeURIComponent(j.id)));
    // the job's status first (waiting, running, or how it ended); the queue's state after it, plain
    cell(tr, "status").appendChild(badge(j.outcome || j.status || "unknown"));
    cell(tr, "queue", "queue-state", j.state, "the queue's state (BullMQ's), not how the job ended");
    cell(tr, "model", null, j.model || "", j.model);
    cell(tr, "turns", "num", j.turns == null ? "" : j.turns);
    cell(tr, "cost", "num", j.costUsd == null ? "" : PB.usd(j.costUsd));
    cell(tr, "duration", "num", j.durationMs == null ? "" : PB.dur(j.durationMs));
    var td = cell(tr, "batch", null, null, j.batchId);
    if (j.batchId) td.appendChild(link(j.batchId, "/jobs?batch=" + encodeURIComponent(j.batchId)));
    var at = j.createdAt ? new Date(j.createdAt) : null;
    cell(tr, "enqueued", "num", at ? at.toLocaleString(undefined, SHORT) : "", at ? at.toLocaleString() : null);
    cell(tr, "task", "task", j.task || "", j.task || "");
    return tr;
  }
  function load() {
    fetch("/api/jobs" + location.search, { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        var frag = document.createDocumentFragment();
        data.jobs.forEach(function (j) {
          frag.appendChild(row(j));
        });
        tbody.textContent = "";
        tbody.appendChild(frag);
        note.textContent = data.jobs.length
          ? PB.count(data.jobs.length, "job") + (q.get("cursor") || data.next ? " on this page" : "")
          : data.next
            ? "none on this page"
            : "no jobs match";
        // pages: the API gives a cursor for the next one; the filters are kept
        pager.textContent = "";
        if (q.get("cursor")) {
          var first = new URLSearchParams(q);
          first.delete("cursor");
          var a1 = el("a", null, "First page");
          a1.href = "/jobs?" + first.toString();
          pager.appendChild(a1);
        }
        if (data.next) {
          var nq = new URLSearchParams(q);
          nq.set("cursor", data.next);
          var a2 = el("a", null, "Next page");
          a2.href = "/jobs?" + nq.toString();
          a2.id = "next";
          pager.appendChild(a2);
        }
      })
      .catch(function (err) {
        note.textContent = "could not load jobs: " + err.message;
      })
      .then(function () {
        setTimeout(load, 2000);
      });
  }
  load();
})();
