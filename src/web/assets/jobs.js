// jobs.js: the /jobs page (jobsPage in src/web/html.ts): the list with its filters, refreshed every
// 2 s. Needs window.PB (transcript.js, loaded first); reads /api/jobs with the page's own query
// (state, status, batch, cursor) and fills #rows, #note and #pager. Data from the API reaches the
// DOM through textContent (PB.el) only.
(function () {
  "use strict";
  var el = PB.el;
  var q = new URLSearchParams(location.search);
  var form = document.getElementById("filters");
  ["state", "status", "batch"].forEach(function (k) { if (q.get(k) && form.elements[k]) form.elements[k].value = q.get(k); });
  form.addEventListener("change", function () { form.submit(); });
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  var pager = document.getElementById("pager");
  function badge(s) { return el("span", "badge s-" + String(s).replace(/[^a-z_]/g, ""), s); }
  function row(j) {
    var tr = el("tr");
    tr.setAttribute("data-job-id", j.id);
    var a = el("a", null, j.id);
    a.href = "/jobs/" + encodeURIComponent(j.id);
    var td = el("td"); td.appendChild(a); tr.appendChild(td);
    td = el("td"); td.appendChild(badge(j.state)); tr.appendChild(td);
    td = el("td"); if (j.status) td.appendChild(badge(j.status)); tr.appendChild(td);
    tr.appendChild(el("td", null, j.model || ""));
    tr.appendChild(el("td", "num", j.turns == null ? "" : j.turns));
    tr.appendChild(el("td", "num", j.costUsd == null ? "" : PB.usd(j.costUsd)));
    tr.appendChild(el("td", "num", j.durationMs == null ? "" : PB.dur(j.durationMs)));
    td = el("td");
    if (j.batchId) { var b = el("a", null, j.batchId); b.href = "/jobs?batch=" + encodeURIComponent(j.batchId); td.appendChild(b); }
    tr.appendChild(td);
    tr.appendChild(el("td", "num", j.createdAt ? new Date(j.createdAt).toLocaleString() : ""));
    var task = el("td", "task", j.task || ""); task.title = PB.clean(j.task || ""); tr.appendChild(task);
    return tr;
  }
  function load() {
    fetch("/api/jobs" + location.search, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (data) {
      var frag = document.createDocumentFragment();
      data.jobs.forEach(function (j) { frag.appendChild(row(j)); });
      tbody.textContent = "";
      tbody.appendChild(frag);
      note.textContent = data.jobs.length ? data.jobs.length + " jobs" + (q.get("cursor") || data.next ? " on this page" : "") : data.next ? "none on this page" : "no jobs match";
      // pages: the API gives a cursor for the next one; the filters are kept
      pager.textContent = "";
      if (q.get("cursor")) { var first = new URLSearchParams(q); first.delete("cursor"); var a1 = el("a", null, "First page"); a1.href = "/jobs?" + first.toString(); pager.appendChild(a1); }
      if (data.next) { var nq = new URLSearchParams(q); nq.set("cursor", data.next); var a2 = el("a", null, "Next page"); a2.href = "/jobs?" + nq.toString(); a2.id = "next"; pager.appendChild(a2); }
    }).catch(function (err) { note.textContent = "could not load jobs: " + err.message; })
      .then(function () { setTimeout(load, 2000); });
  }
  load();
})();
