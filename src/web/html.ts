// The dashboard's HTML shells (no untrusted data in them: pages fetch it as JSON and render it with
// textContent; only a 404 page names the id asked for, escaped) and the self-contained static
// transcript viewer.
import { RENDER_JS } from "./assets/render.js";
import {
  BATCHES_JS,
  CAMPAIGN_JS,
  CAMPAIGNS_JS,
  EVAL_JS,
  EVALS_JS,
  JOB_JS,
  JOBS_JS,
  VIEW_BOOT_JS,
} from "./assets/pages.js";
import { STYLE_CSS } from "./assets/style.js";
import { cspHash, escapeHtml, jsonForScript, prepareEvent } from "./escape.js";
import type { TranscriptEvent } from "../core/spec/spec.js";
import { safeText } from "../core/term.js";

/**
 * Served under /static/: the only scripts and styles the dashboard's own pages load (files in
 * ./assets/). No prototype: a name such as "constructor" is no asset (it was a 500).
 */
export const STATIC_ASSETS: Record<string, { type: string; body: string }> = Object.assign(
  Object.create(null) as Record<string, { type: string; body: string }>,
  {
    "style.css": { type: "text/css; charset=utf-8", body: STYLE_CSS },
    "transcript.js": { type: "text/javascript; charset=utf-8", body: RENDER_JS },
    "jobs.js": { type: "text/javascript; charset=utf-8", body: JOBS_JS },
    "job.js": { type: "text/javascript; charset=utf-8", body: JOB_JS },
    "batches.js": { type: "text/javascript; charset=utf-8", body: BATCHES_JS },
    "campaigns.js": { type: "text/javascript; charset=utf-8", body: CAMPAIGNS_JS },
    "campaign.js": { type: "text/javascript; charset=utf-8", body: CAMPAIGN_JS },
    "evals.js": { type: "text/javascript; charset=utf-8", body: EVALS_JS },
    "eval.js": { type: "text/javascript; charset=utf-8", body: EVAL_JS },
  },
);

/** The dashboard's own pages: scripts from this origin only, no inline script or style, no framing. */
export const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const STATUSES = ["completed", "verify_failed", "failed", "timeout", "budget_exceeded", "cancelled", "max_turns"];
const STATES = ["active", "waiting", "prioritized", "delayed", "completed", "failed"];

function shell(title: string, here: string, script: string | undefined, body: string): string {
  const link = (href: string, label: string) => `<a href="${href}"${href === here ? ' class="here"' : ""}>${label}</a>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/static/style.css">
${script ? `<script src="/static/transcript.js" defer></script>\n<script src="/static/${script}" defer></script>\n` : ""}</head>
<body>
<nav class="top"><span class="brand">patchbay</span>${link("/jobs", "Jobs")}${link("/batches", "Batches")}${link("/campaigns", "Campaigns")}${link("/evals", "Evals")}${link("/queues", "Queues")}${link("/metrics", "Metrics")}</nav>
<main>
${body}
</main>
</body>
</html>
`;
}

/** The jobs table's columns: each cell's class is c-<name> (its width and, on a narrow screen, its label: jobs.js). */
const JOB_COLUMNS = ["job", "status", "queue", "model", "turns", "cost", "duration", "batch", "enqueued", "task"];

const options = (values: string[]) =>
  ['<option value="">any</option>', ...values.map((v) => `<option value="${v}">${v}</option>`)].join("");

export function jobsPage(): string {
  return shell(
    "patchbay · jobs",
    "/jobs",
    "jobs.js",
    `<h1>Jobs</h1>
<form class="filters" id="filters" method="get" action="/jobs">
<label>status <select name="status">${options(STATUSES)}</select></label>
<label>queue state <select name="state">${options(STATES)}</select></label>
<label>batch <input name="batch" size="24" placeholder="batch id"></label>
<button type="submit">Filter</button>
<span class="meta" id="note">loading…</span>
</form>
<table class="list cards jobs" id="jobs">
<thead><tr>${JOB_COLUMNS.map((c) => `<th class="c-${c}">${c}</th>`).join("")}</tr></thead>
<tbody id="rows"></tbody>
</table>
<p class="pager" id="pager"></p>`,
  );
}

export function batchesPage(): string {
  return shell(
    "patchbay · batches",
    "/batches",
    "batches.js",
    `<h1>Batches</h1>
<p class="meta" id="note">loading…</p>
<table class="list cards batches" id="batches">
<thead><tr><th class="c-batch">batch</th><th class="c-progress">progress</th><th class="c-counts">by status</th><th class="c-verified">verified</th><th class="c-spend">spend</th><th class="c-submitted">submitted</th></tr></thead>
<tbody id="rows"></tbody>
</table>`,
  );
}

export function campaignsPage(): string {
  return shell(
    "patchbay · campaigns",
    "/campaigns",
    "campaigns.js",
    `<h1>Campaigns</h1>
<p class="meta" id="note">loading…</p>
<table class="list cards campaigns" id="campaigns">
<thead><tr><th class="c-campaign">campaign</th><th class="c-merged">merged</th><th class="c-counts">by state</th><th class="c-jobs">jobs</th><th class="c-spend">spend</th><th class="c-submitted">submitted</th></tr></thead>
<tbody id="rows"></tbody>
</table>`,
  );
}

/** A changeset table's columns: each cell's class is c-<name> (its width and, on a narrow screen, its label: campaign.js). */
const CHANGESET_COLUMNS = ["line", "repo", "state", "checks", "review", "pr", "job", "reason"];

export function campaignPage(): string {
  return shell(
    "patchbay · campaign",
    "/campaigns",
    "campaign.js",
    `<section class="jobhead burndown" id="burndown">
<h1 id="title">Campaign</h1>
<div class="merged"><div class="bar"><span id="mergedbar"></span></div><span class="meta" id="merged">loading…</span></div>
<p class="states" id="states"></p>
<p class="meta" id="checks"></p>
<p class="meta" id="jobs"></p>
<p class="meta" id="cost"></p>
</section>
<p class="meta" id="note"></p>
<table class="list cards changesets" id="changesets">
<thead><tr>${CHANGESET_COLUMNS.map((c) => `<th class="c-${c}">${c === "pr" ? "pull request" : c}</th>`).join("")}</tr></thead>
<tbody id="rows"></tbody>
</table>`,
  );
}

/** The eval runs list's columns: each cell's class is c-<name> (evals.js). */
const EVAL_COLUMNS = ["run", "model", "resolved", "cost", "per-resolved", "pass1", "bestk", "passk", "started"];
const EVAL_HEADS: Record<string, string> = {
  "per-resolved": "per resolved",
  pass1: "pass@1",
  bestk: "best-of-K",
  passk: "pass@K",
};

export function evalsPage(): string {
  return shell(
    "patchbay · evals",
    "/evals",
    "evals.js",
    `<h1>Evals</h1>
<p class="meta" id="note">loading…</p>
<table class="list cards evals" id="evals">
<thead><tr>${EVAL_COLUMNS.map((c) => `<th class="c-${c}">${EVAL_HEADS[c] ?? c}</th>`).join("")}</tr></thead>
<tbody id="rows"></tbody>
</table>`,
  );
}

/** A run's instance table's columns: each cell's class is c-<name> (eval.js). */
const INSTANCE_COLUMNS = ["instance", "outcome", "candidates", "cost", "tokens", "harness", "jobs"];

export function evalPage(): string {
  return shell(
    "patchbay · eval",
    "/evals",
    "eval.js",
    `<section class="jobhead burndown" id="summary">
<h1 id="title">Eval</h1>
<div class="merged"><div class="bar"><span id="resolvedbar"></span></div><span class="meta" id="resolved">loading…</span></div>
<p class="states" id="outcomes"></p>
<p class="meta" id="cost"></p>
<p class="meta" id="pass"></p>
<p class="meta" id="totals"></p>
<p class="meta" id="run"></p>
</section>
<p class="meta" id="note"></p>
<table class="list cards instances" id="instances">
<thead><tr>${INSTANCE_COLUMNS.map((c) => `<th class="c-${c}">${c === "candidates" ? "candidates resolved" : c}</th>`).join("")}</tr></thead>
<tbody id="rows"></tbody>
</table>`,
  );
}

export function jobPage(): string {
  return shell(
    "patchbay · job",
    "",
    "job.js",
    `<section class="jobhead">
<div id="head"><h1>Job</h1></div>
<div class="actions"><button id="cancel" class="danger" disabled aria-disabled="true">Cancel</button><button id="retry" disabled aria-disabled="true">Retry</button><span class="msg" id="msg"></span><span class="badge" id="live">connecting…</span></div>
</section>
<section id="candidates"></section>
<div class="totals" id="totals"></div>
<section id="transcript"></section>
<section id="diff"></section>`,
  );
}

const LISTS = {
  job: ["/jobs", "jobs"],
  batch: ["/batches", "batches"],
  campaign: ["/campaigns", "campaigns"],
  eval: ["/evals", "evals"],
} as const;

/**
 * The 404 page of a job, batch, campaign or eval id that names nothing (sent with status 404). The id
 * comes from the URL, so it is bounded, stripped of controls and escaped.
 */
export function notFoundPage(what: keyof typeof LISTS, id: string, queueName: string): string {
  const shown = escapeHtml(safeText(id.slice(0, 200), { oneLine: true }));
  const [list, plural] = LISTS[what];
  return shell(
    `patchbay · no ${what}`,
    "",
    undefined,
    `<section class="jobhead notfound" data-not-found="${what}">
<h1>No ${what} <code class="id">${shown}</code></h1>
<p>There is no ${what} with this id in queue <code>${escapeHtml(queueName)}</code>: it may never have existed, or it was removed after the retention (PATCHBAY_RETENTION_SEC).</p>
<p><a href="${list}">All ${plural}</a></p>
</section>`,
  );
}

export interface TranscriptHtmlOptions {
  /** The page title (default: the job id from the events). */
  title?: string;
  /** The job's patch (`git diff --binary`), rendered as a diff after the transcript. */
  patch?: string;
}

/**
 * One self-contained HTML page of a transcript, rendered like the dashboard's job page: the CSS
 * and the scripts inline (allowed by hash in the page's CSP, which allows nothing else: no network
 * request at all), the events embedded as JSON that cannot end its script block.
 */
export function renderTranscriptHtml(events: readonly TranscriptEvent[], opts: TranscriptHtmlOptions = {}): string {
  const jobId = events.find((e) => typeof e?.jobId === "string")?.jobId;
  const title = safeText(opts.title ?? `patchbay · ${jobId ?? "transcript"}`, { oneLine: true });
  const data = jsonForScript({
    events: events.map(prepareEvent),
    ...(opts.patch !== undefined ? { patch: opts.patch } : {}),
  });
  const script = `${RENDER_JS}\n${VIEW_BOOT_JS}`;
  const csp = `default-src 'none'; script-src ${cspHash(script)}; style-src ${cspHash(STYLE_CSS)}; img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<style>${STYLE_CSS}</style>
</head>
<body>
<main>
<section class="jobhead"><h1>${escapeHtml(title)}</h1></section>
<section id="candidates"></section>
<div class="totals" id="totals"></div>
<section id="transcript"></section>
<section id="diff"></section>
</main>
<script type="application/json" id="pb-data">${data}</script>
<script>${script}</script>
</body>
</html>
`;
}
