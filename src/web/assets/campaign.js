// campaign.js: the /campaigns/:id page (campaignPage in src/web/html.ts): the burndown (merged of
// total as a bar, the changesets by state, the CI checks of the open ones, jobs, spend and the cost
// per merged change) and a row per repository (state, checks, review, pull request, job, reason),
// refreshed every 5 s. Needs window.PB (transcript.js, loaded first); takes the campaign id from the
// page's path; reads /api/campaigns/:id. Data reaches the DOM through textContent only; a link's
// href is set only for an http(s) URL (a pull request's) or built here (/jobs/<id>).
(function () {
  "use strict";
  var el = PB.el;
  var cell = PB.cell;
  var id = decodeURIComponent(location.pathname.replace(/^\/campaigns\//, ""));
  var api = "/api/campaigns/" + encodeURIComponent(id);
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  var STATES = ["merged", "open", "draft", "unpublished", "conflict", "closed"];
  document.title = "patchbay · campaign " + PB.clean(id);
  document.getElementById("title").textContent = "Campaign " + PB.clean(id);

  // Only a URL whose scheme is http or https becomes a link (never javascript:, data: or the like).
  function httpUrl(s) {
    try {
      var u = new URL(String(s));
      return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
    } catch (_) {
      return null;
    }
  }
  // github.com/acme/billing for https://github.com/acme/billing.git (the whole URL in the title).
  function shortRepo(s) {
    return String(s)
      .replace(/^[a-z][a-z0-9+.-]*:\/\//i, "")
      .replace(/\.git$/, "");
  }
  function badge(cls, text) {
    return el("span", "badge " + cls, text);
  }
  function plural(n, one, many) {
    return n + " " + (n === 1 ? one : many);
  }

  function burndown(c) {
    document.getElementById("mergedbar").style.width =
      (c.total ? Math.round((100 * c.counts.merged) / c.total) : 0) + "%";
    document.getElementById("merged").textContent =
      c.counts.merged + " of " + plural(c.total, "repository", "repositories") + " merged";
    var states = document.getElementById("states");
    states.textContent = "";
    STATES.forEach(function (k) {
      var b = badge("cs-" + k + (c.counts[k] ? "" : " zero"), k + " " + c.counts[k]);
      b.setAttribute("data-state", k);
      states.appendChild(b);
      states.appendChild(document.createTextNode(" "));
    });
    var open = c.counts.open + c.counts.draft;
    document.getElementById("checks").textContent =
      "checks of the " +
      plural(open, "open one", "open ones") +
      ": " +
      c.checks.passing +
      " passing · " +
      c.checks.failing +
      " failing · " +
      c.checks.pending +
      " pending";
    document.getElementById("jobs").textContent =
      "jobs " +
      c.jobs.done +
      " / " +
      c.jobs.total +
      " done · " +
      c.jobs.running +
      " running · " +
      c.jobs.waiting +
      " waiting · spent " +
      PB.usd(c.spentUsd) +
      (c.budgetUsd != null ? " of " + PB.usd(c.budgetUsd) : "") +
      " · submitted " +
      new Date(c.createdAt).toLocaleString();
    // What a merged change cost, as src/campaign/cost.ts says it: n/a while none merged.
    document.getElementById("cost").textContent =
      "spent " +
      PB.usd(c.spentUsd) +
      " · " +
      (c.costPerMergedUsd == null
        ? "n/a per merged change (none merged)"
        : PB.usd(c.costPerMergedUsd) + " per merged change (" + c.counts.merged + " merged)");
  }

  function prCell(tr, c) {
    var td = cell(tr, "pr", null, null, c.url || c.branch || "");
    td.setAttribute("data-label", "pull request");
    var label = c.number != null ? (c.forge === "gitlab" ? "!" : "#") + c.number : c.url || "";
    var href = c.url ? httpUrl(c.url) : null;
    if (href) {
      var a = el("a", "pr", label);
      a.href = href;
      a.rel = "noopener noreferrer";
      td.appendChild(a);
    } else if (label) td.appendChild(el("span", "pr", label));
    if (c.branch) td.appendChild(el("span", "branch", c.branch));
  }

  function row(c) {
    var tr = el("tr");
    tr.setAttribute("data-line", String(c.line));
    cell(tr, "line", "num", c.line);
    cell(tr, "repo", null, shortRepo(c.repo), c.repo);
    var td = cell(tr, "state");
    td.appendChild(badge("cs-" + String(c.state).replace(/[^a-z]/g, ""), c.state));
    if (c.verified === false && c.state !== "unpublished") {
      td.appendChild(document.createTextNode(" "));
      td.appendChild(badge("unverified", "unverified"));
    }
    td = cell(tr, "checks");
    if (c.checks && c.checks !== "none")
      td.appendChild(badge("ck-" + String(c.checks).replace(/[^a-z]/g, ""), c.checks));
    cell(tr, "review", null, c.review && c.review !== "none" ? String(c.review).replace(/_/g, " ") : "");
    prCell(tr, c);
    td = cell(tr, "job", null, null, c.jobId);
    if (c.jobId) {
      var a = el("a", null, c.jobId);
      a.href = "/jobs/" + encodeURIComponent(c.jobId);
      td.appendChild(a);
    }
    cell(tr, "reason", "reason", c.reason || "", c.reason || "");
    return tr;
  }

  function load() {
    fetch(api, { credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 404) throw new Error("no campaign " + id + " (removed after the retention?)");
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (c) {
        burndown(c);
        var frag = document.createDocumentFragment();
        c.changesets.forEach(function (x) {
          frag.appendChild(row(x));
        });
        tbody.textContent = "";
        tbody.appendChild(frag);
        note.textContent = "";
      })
      .catch(function (err) {
        note.textContent = "could not load the campaign: " + err.message;
      })
      .then(function () {
        setTimeout(load, 5000);
      });
  }
  load();
})();
