// The dashboard pages' scripts and the static viewer's boot script: plain browser JavaScript,
// written by hand, served as static files (script-src 'self'). Data comes from the JSON API and
// reaches the DOM through textContent (PB.el) only. No backticks inside these strings.

/** /jobs: the list with its filters, refreshed every 2 s. */
export const JOBS_JS = String.raw`(function () {
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
`;

/** /batches: progress, counts by status, spend, links to their jobs. */
export const BATCHES_JS = String.raw`(function () {
  "use strict";
  var el = PB.el;
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  function load() {
    fetch("/api/batches", { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (data) {
      var frag = document.createDocumentFragment();
      data.batches.forEach(function (b) {
        var tr = el("tr");
        tr.setAttribute("data-batch-id", b.id);
        var a = el("a", null, b.id); a.href = "/jobs?batch=" + encodeURIComponent(b.id);
        var td = el("td"); td.appendChild(a);
        if (b.cancelled) { td.appendChild(el("span", null, " ")); td.appendChild(el("span", "badge s-cancelled", "cancelled")); }
        tr.appendChild(td);
        td = el("td", "progress");
        var bar = el("div", "bar"); var fill = el("span");
        fill.style.width = (b.total ? Math.round(100 * b.done / b.total) : 0) + "%";
        bar.appendChild(fill); td.appendChild(bar);
        td.appendChild(el("span", "meta", b.done + " / " + b.total + " done · " + b.running + " running · " + b.waiting + " waiting"));
        tr.appendChild(td);
        td = el("td", "counts");
        Object.keys(b.byStatus).sort().forEach(function (k) {
          var s = el("a", "badge s-" + k, k + " " + b.byStatus[k]);
          s.href = "/jobs?batch=" + encodeURIComponent(b.id) + "&status=" + encodeURIComponent(k);
          td.appendChild(s); td.appendChild(document.createTextNode(" "));
        });
        tr.appendChild(td);
        tr.appendChild(el("td", "num", b.verified + " / " + (b.verified + b.unverified)));
        tr.appendChild(el("td", "num spend", PB.usd(b.spentUsd) + (b.budgetUsd != null ? " of " + PB.usd(b.budgetUsd) : "")));
        tr.appendChild(el("td", "num", new Date(b.createdAt).toLocaleString()));
        frag.appendChild(tr);
      });
      tbody.textContent = "";
      tbody.appendChild(frag);
      note.textContent = data.batches.length ? data.batches.length + " batches" : "no batches (patchbay batch submit)";
    }).catch(function (err) { note.textContent = "could not load batches: " + err.message; })
      .then(function () { setTimeout(load, 3000); });
  }
  load();
})();
`;

/** /jobs/:id: the job's head, its transcript live over server-sent events, its patch, cancel and retry. */
export const JOB_JS = String.raw`(function () {
  "use strict";
  var el = PB.el;
  var id = decodeURIComponent(location.pathname.replace(/^\/jobs\//, ""));
  var api = "/api/jobs/" + encodeURIComponent(id);
  var head = document.getElementById("head");
  var msg = document.getElementById("msg");
  var cancelBtn = document.getElementById("cancel");
  var retryBtn = document.getElementById("retry");
  var diffBox = document.getElementById("diff");
  var live = document.getElementById("live");
  var t = new PB.Transcript(document.getElementById("transcript"), {
    totals: document.getElementById("totals"),
    onRendered: function (count, pending) { if (!pending) live.setAttribute("data-count", String(count)); },
  });
  document.title = "patchbay · " + PB.clean(id);
  var lastId = null, es = null, info = null, shownPatch = null;

  function field(dl, name, value, cls) {
    var box = el("div");
    box.appendChild(el("dt", null, name));
    var dd = el("dd", cls || null);
    if (value instanceof Node) dd.appendChild(value); else dd.textContent = PB.clean(value == null ? "" : value);
    box.appendChild(dd);
    dl.appendChild(box);
  }
  function showInfo(j) {
    info = j;
    head.textContent = "";
    var h = el("h1", null, "Job " + j.id); head.appendChild(h);
    if (j.task) head.appendChild(PB.block(j.task, "task"));
    var dl = el("dl");
    field(dl, "state", el("span", "badge s-" + j.state, j.state));
    field(dl, "status", j.status ? el("span", "badge s-" + j.status, j.status) : "");
    field(dl, "model", j.model);
    field(dl, "turns", j.turns);
    field(dl, "cost", j.costUsd == null ? "" : PB.usd(j.costUsd));
    field(dl, "duration", j.durationMs == null ? "" : PB.dur(j.durationMs));
    field(dl, "attempts", j.attemptsMade);
    if (j.batchId) { var a = el("a", null, j.batchId); a.href = "/jobs?batch=" + encodeURIComponent(j.batchId); field(dl, "batch", a); }
    head.appendChild(dl);
    if (j.failedReason) { head.appendChild(el("span", "mark-error", "✗ failed: ")); head.appendChild(PB.block(j.failedReason, "out")); }
    if (j.error) { head.appendChild(el("span", "mark-error", "✗ ")); head.appendChild(PB.block(j.error, "out")); }
    var running = j.state === "active" || j.state === "waiting" || j.state === "delayed" || j.state === "prioritized";
    cancelBtn.disabled = !running;
    retryBtn.disabled = running;
    head.setAttribute("data-state", j.state);
    head.setAttribute("data-status", j.status || "");
    var files = j.filesChangedTotal != null ? j.filesChangedTotal : j.filesChanged ? j.filesChanged.length : null;
    if (typeof j.patch === "string" && j.patch !== shownPatch) {
      shownPatch = j.patch;
      diffBox.textContent = "";
      diffBox.appendChild(el("h2", null, "Patch" + (files != null ? " (" + files + " files)" : "")));
      diffBox.appendChild(j.patch ? PB.renderDiff(j.patch) : el("div", "empty", "no changes"));
    } else if (typeof j.patch !== "string" && j.patchBytes != null && shownPatch !== "#" + j.patchBytes) {
      // too long to show here: a link to the whole patch, as a file
      shownPatch = "#" + j.patchBytes;
      diffBox.textContent = "";
      diffBox.appendChild(el("h2", null, "Patch" + (files != null ? " (" + files + " files)" : "")));
      var p = el("p", "meta", PB.num(j.patchBytes) + " bytes: too long to show here. ");
      var dl = el("a", null, "Download the patch"); dl.href = api + "/patch"; dl.id = "patch-link";
      p.appendChild(dl);
      diffBox.appendChild(p);
    }
  }
  function refresh() {
    return fetch(api, { credentials: "same-origin" }).then(function (r) {
      if (r.status === 404) { head.textContent = ""; head.appendChild(el("h1", null, "No job " + id)); throw new Error("not found"); }
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(showInfo);
  }
  function connect() {
    if (es) es.close();
    es = new EventSource(api + "/events" + (lastId ? "?after=" + encodeURIComponent(lastId) : ""));
    live.textContent = "live";
    es.onmessage = function (m) {
      if (m.lastEventId) lastId = m.lastEventId;
      var events;
      try { events = JSON.parse(m.data); } catch (err) { return; }
      t.addAll(events);
    };
    es.addEventListener("end", function () {
      es.close(); es = null;
      live.textContent = "finished";
      refresh().catch(function () {});
    });
    es.onerror = function () { live.textContent = "reconnecting…"; };
  }
  function action(name, btn) {
    btn.disabled = true;
    msg.textContent = name + "…";
    fetch(api + "/" + name, { method: "POST", credentials: "same-origin", headers: { "x-patchbay-action": "1" } }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (r.status === 401) throw new Error("needs the dashboard token: open this page once as ?token=…");
        if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
        return body;
      });
    }).then(function (body) {
      msg.textContent = name + ": " + (body.result || "ok");
      if (name === "retry" && !es) connect();
      return refresh();
    }).catch(function (err) { msg.textContent = name + " failed: " + err.message; btn.disabled = false; });
  }
  cancelBtn.addEventListener("click", function () { action("cancel", cancelBtn); });
  retryBtn.addEventListener("click", function () { action("retry", retryBtn); });
  t.onEvent(function (e) { if (e.type === "job_finished" || e.type === "sandbox_ready") refresh().catch(function () {}); });
  connect(); // the transcript and the head load side by side
  refresh().catch(function () { if (es) { es.close(); es = null; live.textContent = "no such job"; } });
  setInterval(function () { if (info && info.state !== "completed" && info.state !== "failed") refresh().catch(function () {}); }, 3000);
})();
`;

/** The static viewer: renders the embedded transcript (and patch) once. */
export const VIEW_BOOT_JS = String.raw`(function () {
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
`;
