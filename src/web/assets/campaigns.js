// campaigns.js: the /campaigns page (campaignsPage in src/web/html.ts): each campaign's merged of
// total as a bar, its changesets by state, its jobs and spend, refreshed every 5 s. Needs window.PB
// (transcript.js, loaded first); reads /api/campaigns and fills #rows and #note. Data reaches the
// DOM through textContent only.
(function () {
  "use strict";
  var el = PB.el;
  var cell = PB.cell;
  var tbody = document.getElementById("rows");
  var note = document.getElementById("note");
  var STATES = ["merged", "open", "draft", "unpublished", "conflict", "closed"];
  function row(c) {
    var tr = el("tr");
    tr.setAttribute("data-campaign-id", c.id);
    var a = el("a", null, c.id);
    a.href = "/campaigns/" + encodeURIComponent(c.id);
    cell(tr, "campaign", null, null, c.id).appendChild(a);
    var td = cell(tr, "merged", "progress");
    var bar = el("div", "bar");
    var fill = el("span");
    fill.style.width = (c.total ? Math.round((100 * c.counts.merged) / c.total) : 0) + "%";
    bar.appendChild(fill);
    td.appendChild(bar);
    td.appendChild(el("span", "meta", c.counts.merged + " / " + c.total + " merged"));
    td = cell(tr, "counts", "counts");
    td.setAttribute("data-label", "by state");
    STATES.forEach(function (k) {
      if (!c.counts[k]) return;
      td.appendChild(el("span", "badge cs-" + k, k + " " + c.counts[k]));
      td.appendChild(document.createTextNode(" "));
    });
    cell(tr, "jobs", "num", c.jobs.done + " / " + c.jobs.total + " done");
    cell(tr, "spend", "num spend", PB.usd(c.spentUsd) + (c.budgetUsd != null ? " of " + PB.usd(c.budgetUsd) : ""));
    cell(tr, "submitted", "num", new Date(c.createdAt).toLocaleString());
    return tr;
  }
  function load() {
    fetch("/api/campaigns", { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        var frag = document.createDocumentFragment();
        data.campaigns.forEach(function (c) {
          frag.appendChild(row(c));
        });
        tbody.textContent = "";
        tbody.appendChild(frag);
        note.textContent = data.campaigns.length
          ? PB.count(data.campaigns.length, "campaign")
          : "no campaigns (patchbay campaign submit)";
      })
      .catch(function (err) {
        note.textContent = "could not load campaigns: " + err.message;
      })
      .then(function () {
        setTimeout(load, 5000);
      });
  }
  load();
})();
