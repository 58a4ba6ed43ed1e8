// job.js: the /jobs/:id page (jobPage in src/web/html.ts): the job's head, its candidates side by
// side (a job with candidates: a card each, the picked one marked, each linking to its own job's
// page), its transcript live over server-sent events, its patch, cancel and retry. Needs window.PB (transcript.js, loaded first);
// takes the job id from the page's path; reads /api/jobs/:id and /api/jobs/:id/events, posts
// /api/jobs/:id/cancel and /retry. Data from the API reaches the DOM through textContent only.
(function () {
  "use strict";
  var el = PB.el;
  var id = decodeURIComponent(location.pathname.replace(/^\/jobs\//, ""));
  var api = "/api/jobs/" + encodeURIComponent(id);
  var head = document.getElementById("head");
  var msg = document.getElementById("msg");
  var cancelBtn = document.getElementById("cancel");
  var retryBtn = document.getElementById("retry");
  var diffBox = document.getElementById("diff");
  var candBox = document.getElementById("candidates");
  var live = document.getElementById("live");
  var t = new PB.Transcript(document.getElementById("transcript"), {
    totals: document.getElementById("totals"),
    onRendered: function (count, pending) {
      if (!pending) live.setAttribute("data-count", String(count));
    },
  });
  document.title = "patchbay · " + PB.clean(id);
  var lastId = null,
    es = null,
    info = null,
    shownPatch = null,
    shownCandidates = null,
    pickWhy = null;

  // disabled, and said so to assistive technology and in the button's tooltip
  function able(btn, on, why) {
    btn.disabled = !on;
    btn.setAttribute("aria-disabled", on ? "false" : "true");
    if (on) btn.removeAttribute("title");
    else btn.title = why;
  }
  function field(dl, name, value, cls) {
    var box = el("div");
    box.appendChild(el("dt", null, name));
    var dd = el("dd", cls || null);
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = PB.clean(value == null ? "" : value);
    box.appendChild(dd);
    dl.appendChild(box);
    return dd;
  }
  // The head's turns and cost while the job runs: the transcript's counts so far (the result has
  // none yet), "pending" before the model's first answer.
  var liveTurns = null,
    liveCost = null;
  function showLive() {
    if (!info || info.status) return;
    if (liveTurns) liveTurns.textContent = String(Math.max(t.t.turns, info.turns || 0));
    if (liveCost) liveCost.textContent = t.t.responses ? PB.usd(t.t.cost) + " so far" : "pending";
  }
  var READ_ONLY = "read-only: Cancel and Retry need the dashboard's token (open this page once as ?token=…)";
  function showInfo(j) {
    info = j;
    head.textContent = "";
    var h = el("h1", null, "Job " + j.id);
    head.appendChild(h);
    if (j.task) head.appendChild(PB.block(j.task, "task"));
    var dl = el("dl");
    // The job's status first (its result's, or waiting/running); the queue's state after it, as plain
    // text: BullMQ calls a cancelled job "completed" (it handed back a result).
    var outcome = String(j.outcome || j.status || "unknown").replace(/[^a-z_]/g, "");
    field(dl, "status", el("span", "badge s-" + outcome, outcome));
    field(dl, "queue", j.state, "queue-state").title = "the queue's state (BullMQ's), not how the job ended";
    field(dl, "model", j.model);
    liveTurns = field(dl, "turns", j.turns);
    liveCost = field(dl, "cost", j.costUsd == null ? "" : PB.usd(j.costUsd));
    field(dl, "duration", j.durationMs == null ? "" : PB.dur(j.durationMs));
    field(dl, "attempts", j.attemptsMade);
    if (j.batchId) {
      var a = el("a", null, j.batchId);
      a.href = "/jobs?batch=" + encodeURIComponent(j.batchId);
      field(dl, "batch", a);
    }
    head.appendChild(dl);
    if (j.failedReason) {
      head.appendChild(el("span", "mark-error", "✗ failed: "));
      head.appendChild(PB.block(j.failedReason, "out"));
    }
    if (j.error) {
      head.appendChild(el("span", "mark-error", "✗ "));
      head.appendChild(PB.block(j.error, "out"));
    }
    var queued = j.state === "active" || j.state === "waiting" || j.state === "delayed" || j.state === "prioritized";
    // a status means the job ended, even while BullMQ still calls it active (its result is being stored)
    if (j.canWrite === false) {
      // tokenless reads (--loopback-reads): the actions would be refused, so they are off, saying why
      able(cancelBtn, false, READ_ONLY);
      able(retryBtn, false, READ_ONLY);
      if (!msg.textContent) msg.textContent = READ_ONLY;
    } else {
      able(cancelBtn, queued && !j.status, "the job has finished: nothing to cancel");
      able(retryBtn, !queued, "the job is still queued or running");
    }
    showLive();
    showCandidates(j);
    head.setAttribute("data-state", j.state);
    head.setAttribute("data-status", j.status || "");
    var files = j.filesChangedTotal != null ? j.filesChangedTotal : j.filesChanged ? j.filesChanged.length : null;
    if (typeof j.patch === "string" && j.patch !== shownPatch) {
      shownPatch = j.patch;
      diffBox.textContent = "";
      diffBox.appendChild(el("h2", null, "Patch" + (files != null ? " (" + PB.count(files, "file") + ")" : "")));
      diffBox.appendChild(j.patch ? PB.renderDiff(j.patch) : el("div", "empty", "no changes"));
    } else if (typeof j.patch !== "string" && j.patchBytes != null && shownPatch !== "#" + j.patchBytes) {
      // too long to show here: a link to the whole patch, as a file
      shownPatch = "#" + j.patchBytes;
      diffBox.textContent = "";
      diffBox.appendChild(el("h2", null, "Patch" + (files != null ? " (" + PB.count(files, "file") + ")" : "")));
      var p = el("p", "meta", PB.count(j.patchBytes, "byte") + ": too long to show here. ");
      var download = el("a", null, "Download the patch");
      download.href = api + "/patch";
      download.id = "patch-link";
      p.appendChild(download);
      diffBox.appendChild(p);
    }
  }
  // A job with candidates: a card per candidate, side by side (status, verified, cost, turns, patch
  // size, files changed, error), the picked one marked, each linking to the candidate's own job page;
  // then why it was picked (the transcript's candidate_picked). Redrawn only when what it shows changed.
  function showCandidates(j) {
    var cs = Array.isArray(j.candidates) ? j.candidates : [];
    var key = JSON.stringify([cs, j.picked == null ? null : j.picked, pickWhy]);
    if (key === shownCandidates) return;
    shownCandidates = key;
    candBox.textContent = "";
    if (!cs.length) return;
    candBox.appendChild(
      el("h2", null, "Candidates (" + PB.count(cs.length, "candidate") + (j.picked == null ? ", none picked)" : ")")),
    );
    var grid = el("div", "cands");
    cs.forEach(function (c) {
      grid.appendChild(candidateCard(c, c.n === j.picked));
    });
    candBox.appendChild(grid);
    if (pickWhy) candBox.appendChild(el("p", "meta why", "Why: " + pickWhy));
  }
  function candidateCard(c, picked) {
    var card = el("article", "cand" + (picked ? " picked" : ""));
    card.setAttribute("data-n", String(Number(c.n)));
    var h = el("h3", null, "Candidate " + Number(c.n));
    if (picked) h.appendChild(el("span", "badge picked", "picked"));
    card.appendChild(h);
    var link = el("a", "job", c.jobId);
    link.href = "/jobs/" + encodeURIComponent(String(c.jobId));
    card.appendChild(link);
    var dl = el("dl");
    var status = String(c.status || "unknown").replace(/[^a-z_]/g, "");
    field(dl, "status", el("span", "badge s-" + status, status));
    field(dl, "verified", c.verified == null ? "—" : c.verified ? "yes" : "no");
    field(dl, "cost", c.costUsd == null ? "" : PB.usd(c.costUsd));
    field(dl, "turns", c.turns == null ? "" : PB.num(c.turns));
    field(dl, "patch", c.patchBytes == null ? "" : PB.count(c.patchBytes, "byte"));
    field(dl, "files", c.filesChanged == null ? "" : PB.count(c.filesChanged, "file"));
    card.appendChild(dl);
    if (c.error) {
      card.appendChild(el("span", "mark-error", "✗ "));
      card.appendChild(PB.block(c.error, "out"));
    }
    return card;
  }
  function refresh() {
    return fetch(api, { credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 404) {
          head.textContent = "";
          head.appendChild(el("h1", null, "No job " + id));
          throw new Error("not found");
        }
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(showInfo);
  }
  function connect() {
    if (es) es.close();
    es = new EventSource(api + "/events" + (lastId ? "?after=" + encodeURIComponent(lastId) : ""));
    live.textContent = "live";
    es.onmessage = function (m) {
      if (m.lastEventId) lastId = m.lastEventId;
      var events;
      try {
        events = JSON.parse(m.data);
      } catch (_) {
        return;
      }
      t.addAll(events);
    };
    es.addEventListener("end", function () {
      es.close();
      es = null;
      live.textContent = "finished";
      refresh().catch(function () {});
    });
    es.onerror = function () {
      live.textContent = "reconnecting…";
    };
  }
  function action(name, btn) {
    able(btn, false, name + " in progress");
    msg.textContent = name + "…";
    fetch(api + "/" + name, { method: "POST", credentials: "same-origin", headers: { "x-patchbay-action": "1" } })
      .then(function (r) {
        return r
          .json()
          .catch(function () {
            return {};
          })
          .then(function (body) {
            if (r.status === 401) throw new Error("needs the dashboard token: open this page once as ?token=…");
            if (!r.ok) throw new Error(body.detail || "HTTP " + r.status); // application/problem+json
            return body;
          });
      })
      .then(function (body) {
        msg.textContent = name + ": " + (body.result || "ok");
        if (name === "retry" && !es) connect();
        return refresh();
      })
      .catch(function (err) {
        msg.textContent = name + " failed: " + err.message;
        able(btn, true);
      });
  }
  cancelBtn.addEventListener("click", function () {
    action("cancel", cancelBtn);
  });
  retryBtn.addEventListener("click", function () {
    action("retry", retryBtn);
  });
  t.onEvent(function (e) {
    showLive();
    if (e.type === "candidate_picked" && typeof e.why === "string") {
      pickWhy = e.why;
      if (info) showCandidates(info);
    }
    if (e.type === "job_finished" || e.type === "sandbox_ready") refresh().catch(function () {});
  });
  connect(); // the transcript and the head load side by side
  refresh().catch(function () {
    if (es) {
      es.close();
      es = null;
      live.textContent = "no such job";
    }
  });
  setInterval(function () {
    if (info && info.state !== "completed" && info.state !== "failed") refresh().catch(function () {});
  }, 3000);
})();
