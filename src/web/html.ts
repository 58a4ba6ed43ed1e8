// The dashboard's HTML shells (no untrusted data in them: pages fetch it as JSON and render it with
// textContent) and the self-contained static transcript viewer.
import { RENDER_JS } from "./assets/render.js";
import { BATCHES_JS, JOB_JS, JOBS_JS, VIEW_BOOT_JS } from "./assets/pages.js";
import { STYLE_CSS } from "./assets/style.js";
import { cspHash, escapeHtml, jsonForScript, prepareEvent } from "./escape.js";
import type { TranscriptEvent } from "../spec.js";
import { safeText } from "../term.js";

/**
 * Served under /static/: the only scripts and styles the dashboard's own pages load (files in
 * ./assets/). No prototype: a name such as "constructor" is no asset (it was a 500).
 */
export const STATIC_ASSETS: Record<string, { type: string; body: string }> = Object.assign(Object.create(null) as Record<string, { type: string; body: string }>, {
  "style.css": { type: "text/css; charset=utf-8", body: STYLE_CSS },
  "transcript.js": { type: "text/javascript; charset=utf-8", body: RENDER_JS },
  "jobs.js": { type: "text/javascript; charset=utf-8", body: JOBS_JS },
  "job.js": { type: "text/javascript; charset=utf-8", body: JOB_JS },
  "batches.js": { type: "text/javascript; charset=utf-8", body: BATCHES_JS },
});

/** The dashboard's own pages: scripts from this origin only, no inline script or style, no framing. */
export const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const STATUSES = ["completed", "verify_failed", "failed", "timeout", "budget_exceeded", "cancelled", "max_turns"];
const STATES = ["active", "waiting", "prioritized", "delayed", "completed", "failed"];

function shell(title: string, here: string, script: string, body: string): string {
  const link = (href: string, label: string) => `<a href="${href}"${href === here ? ' class="here"' : ""}>${label}</a>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/static/style.css">
<script src="/static/transcript.js" defer></script>
<script src="/static/${script}" defer></script>
</head>
<body>
<nav class="top"><span class="brand">patchbay</span>${link("/jobs", "Jobs")}${link("/batches", "Batches")}${link("/queues", "Queues")}${link("/metrics", "Metrics")}</nav>
<main>
${body}
</main>
</body>
</html>
`;
}

const options = (values: string[]) => ['<option value="">any</option>', ...values.map((v) => `<option value="${v}">${v}</option>`)].join("");

export function jobsPage(): string {
  return shell(
    "patchbay · jobs",
    "/jobs",
    "jobs.js",
    `<h1>Jobs</h1>
<form class="filters" id="filters" method="get" action="/jobs">
<label>state <select name="state">${options(STATES)}</select></label>
<label>status <select name="status">${options(STATUSES)}</select></label>
<label>batch <input name="batch" size="24" placeholder="batch id"></label>
<button type="submit">Filter</button>
<span class="meta" id="note">loading…</span>
</form>
<table class="list" id="jobs">
<thead><tr><th>job</th><th>state</th><th>status</th><th>model</th><th>turns</th><th>cost</th><th>duration</th><th>batch</th><th>enqueued</th><th>task</th></tr></thead>
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
<table class="list" id="batches">
<thead><tr><th>batch</th><th>progress</th><th>by status</th><th>verified</th><th>spend</th><th>submitted</th></tr></thead>
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
<div class="actions"><button id="cancel" class="danger" disabled>Cancel</button><button id="retry" disabled>Retry</button><span class="msg" id="msg"></span><span class="badge" id="live">connecting…</span></div>
</section>
<div class="totals" id="totals"></div>
<section id="transcript"></section>
<section id="diff"></section>`,
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
  const data = jsonForScript({ events: events.map(prepareEvent), ...(opts.patch !== undefined ? { patch: opts.patch } : {}) });
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
