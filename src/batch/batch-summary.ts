// The summary of a batch: counts, verify, cost, tokens, job times, the most common errors, and its
// Markdown form (every cell from a job or a task is escaped: they are hostile text).
import { count } from "../core/count.js";
import { JOB_STATUSES, type JobStatus, type Usage } from "../core/spec/spec.js";
import { safeText } from "../core/term.js";
import { usd } from "../core/money.js";
import type { BatchJob, BatchStatus } from "./batch-types.js";

/** A batch's summary: what `patchbay batch summary` and summary.json hold. */
export interface BatchSummary {
  /** The batch's id. */
  batchId: string;
  /** Its name, where it was given one. */
  name?: string;
  /** When it was submitted (ISO 8601). */
  createdAt: string;
  /** When its last line ended (ISO 8601), once all have. */
  finishedAt?: string;
  /** Its lines. */
  total: number;
  /** By the status of each line's latest job. */
  counts: Record<JobStatus, number>;
  /** Latest jobs: verify passed, failed, or there was none (or it never ran). */
  verify: { verified: number; unverified: number; none: number };
  /** The latest attempt of each line, and everything spent (retried jobs and failed attempts too). */
  costUsd: { latest: number; all: number; budget?: number };
  /** The tokens of the latest jobs. */
  tokens: Usage;
  /** The latest jobs' durations in ms: median, 95th percentile, longest. */
  jobMs: { p50: number; p95: number; max: number };
  /** The most common errors of the latest jobs, most common first (at most 10). */
  errors: { error: string; count: number }[];
  /** Every line's latest job, with its task. */
  jobs: (BatchJob & { task?: string })[];
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]! : 0;

/** Most common errors: by their first line, digits kept (exit codes tell causes apart). */
export function summarizeBatch(st: BatchStatus, tasks: Record<string, string> = {}): BatchSummary {
  const jobs = st.jobs ?? [];
  const done = jobs.filter((j) => j.result).map((j) => j.result!);
  const tokens = done.reduce(
    (u, r) => ({
      inputTokens: u.inputTokens + r.usage.inputTokens,
      outputTokens: u.outputTokens + r.usage.outputTokens,
      cacheReadTokens: u.cacheReadTokens + r.usage.cacheReadTokens,
      cacheWriteTokens: u.cacheWriteTokens + r.usage.cacheWriteTokens,
    }),
    { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
  );
  const ms = done.map((r) => r.totalMs).sort((a, b) => a - b);
  const errors = new Map<string, number>();
  for (const r of done)
    if (r.error && r.status !== "completed") {
      const e = r.error.split("\n")[0]!.trim().slice(0, 200);
      errors.set(e, (errors.get(e) ?? 0) + 1);
    }
  return {
    batchId: st.batchId,
    ...(st.name ? { name: st.name } : {}),
    createdAt: new Date(st.createdAt).toISOString(),
    ...(st.finishedAt ? { finishedAt: new Date(st.finishedAt).toISOString() } : {}),
    total: st.total,
    counts: st.counts,
    verify: { verified: st.verified, unverified: st.unverified, none: st.total - st.verified - st.unverified },
    costUsd: {
      latest: round(done.reduce((s, r) => s + r.costUsd, 0)),
      all: round(st.spentUsd),
      ...(st.budgetUsd !== undefined ? { budget: st.budgetUsd } : {}),
    },
    tokens,
    jobMs: { p50: percentile(ms, 50), p95: percentile(ms, 95), max: ms.at(-1) ?? 0 },
    errors: [...errors]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 10)
      .map(([error, count]) => ({ error, count })),
    jobs: jobs.map((j) => ({ ...j, ...(tasks[j.line] !== undefined ? { task: tasks[j.line] } : {}) })),
  };
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

/** Text from a job or a task in a Markdown table cell: one line, no controls, no table or markup syntax. */
export function mdCell(s: string, max = 120): string {
  let one = safeText(s, { oneLine: true }).replace(/\s+/g, " ").trim();
  if (one.length > max) one = `${one.slice(0, max - 1)}…`;
  return one.replace(/[\\`*_[\]<>|#!~&]/g, (ch) => (ch === "&" ? "&amp;" : `\\${ch}`));
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The summary as Markdown (summary.md), every cell from a job or a task escaped. */
export function summaryMarkdown(s: BatchSummary): string {
  const counts = JOB_STATUSES.filter((k) => s.counts[k])
    .map((k) => `${k} ${s.counts[k]}`)
    .join(", ");
  const lines = [
    `# Batch ${mdCell(s.batchId)}${s.name && s.name !== s.batchId ? ` (${mdCell(s.name)})` : ""}`,
    "",
    `- Jobs: ${s.total} (${counts || "none finished"})`,
    `- Verify: ${s.verify.verified} passed, ${s.verify.unverified} failed, ${s.verify.none} without a verify`,
    `- Cost: ${usd(s.costUsd.latest)} for the latest attempts, ${usd(s.costUsd.all)} spent in all${s.costUsd.budget !== undefined ? ` (budget ${usd(s.costUsd.budget)})` : ""}`,
    `- Tokens: ${s.tokens.inputTokens} input, ${s.tokens.outputTokens} output, ${count(s.tokens.cacheReadTokens, "cache read")}, ${count(s.tokens.cacheWriteTokens, "cache write")}`,
    `- Job time: p50 ${secs(s.jobMs.p50)}, p95 ${secs(s.jobMs.p95)}, max ${secs(s.jobMs.max)}`,
    `- Created ${s.createdAt}${s.finishedAt ? `, finished ${s.finishedAt}` : ""}`,
    "",
  ];
  if (s.errors.length) {
    lines.push(
      "## Most common errors",
      "",
      "| Count | Error |",
      "| ---: | --- |",
      ...s.errors.map((e) => `| ${e.count} | ${mdCell(e.error, 200)} |`),
      "",
    );
  }
  lines.push(
    "## Jobs",
    "",
    "| Line | Job | Status | Verified | Cost | Tokens in / out / cache read | Time | Task | Error |",
    "| ---: | --- | --- | --- | ---: | --- | ---: | --- | --- |",
  );
  for (const j of s.jobs) {
    const r = j.result;
    const v = r?.verified === undefined ? "" : r.verified ? "yes" : "no";
    const tok = r ? `${r.usage.inputTokens} / ${r.usage.outputTokens} / ${r.usage.cacheReadTokens}` : "";
    lines.push(
      `| ${j.line} | ${mdCell(j.jobId)} | ${r ? r.status : j.state} | ${v} | ${r ? usd(r.costUsd) : ""} | ${tok} | ${r ? secs(r.totalMs) : ""} | ${mdCell(j.task ?? "", 80)} | ${mdCell(r?.error ?? "", 120)} |`,
    );
  }
  return lines.join("\n") + "\n";
}
