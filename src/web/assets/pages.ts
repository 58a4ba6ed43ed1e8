// The dashboard pages' scripts and the static viewer's boot script (plain browser JavaScript, each
// in a file of its own here: its header says what it reads and does).
import { asset } from "../../core/assets.js";

/** /jobs: the list with its filters. */
export const JOBS_JS = asset("web/assets/jobs.js");
/** /batches: progress, counts by status, spend. */
export const BATCHES_JS = asset("web/assets/batches.js");
/** /campaigns: each campaign's changesets by state, merged of total, its jobs and spend. */
export const CAMPAIGNS_JS = asset("web/assets/campaigns.js");
/** /campaigns/:id: the burndown and a row per repository (state, checks, review, pull request). */
export const CAMPAIGN_JS = asset("web/assets/campaign.js");
/** /evals: each eval run's resolved of total, cost, cost per resolved, pass@1 and pass@K. */
export const EVALS_JS = asset("web/assets/evals.js");
/** /evals/:name: a run's summary and a row per instance (outcome, candidates resolved, cost, tokens, harness time, jobs). */
export const EVAL_JS = asset("web/assets/eval.js");
/** /jobs/:id: the job's head, its live transcript, its patch, cancel and retry. */
export const JOB_JS = asset("web/assets/job.js");
/** The static viewer: renders the embedded transcript (and patch) once. */
export const VIEW_BOOT_JS = asset("web/assets/view.js");
