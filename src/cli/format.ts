// The one rendering of a job for `patchbay run` (queued or --local) and `patchbay watch`: a line of
// progress per transcript event, and the final line.
// Every string in an event may come from a hostile repo or model (task, commands, tool output and input,
// file names, errors): nothing in it may reach the terminal as a control sequence (see core/term.ts).
import { count, plural } from "../core/count.js";
import { BUILTIN_TOOL_NAMES } from "../core/spec/tools.js";
import { filesChangedCount, type CandidateOutcome, type JobResult, type TranscriptEvent } from "../core/spec/spec.js";
import { safeText } from "../core/term.js";
import { usd } from "../core/money.js";

/** Sanitized first, so an escape sequence neither uses up the length nor gets cut in two. */
const short = (s: string, n = 110) => {
  const one = safeText(s, { oneLine: true }).replace(/\s+/g, " ").trim();
  if (one.length <= n) return one;
  const cut = /[\ud800-\udbff]/.test(one[n - 2] ?? "") ? n - 2 : n - 1; // never half a surrogate pair
  return `${one.slice(0, cut)}…`;
};
/** A field of a tool call's input as text: the model may send any JSON there, so a non-string shows as JSON. */
const field = (v: unknown): string => (typeof v === "string" ? v : (JSON.stringify(v) ?? ""));
const k = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));

/** The last line: the job's status, why it did not complete, what it changed (and where its patch is, when written). */
export function finalLine(id: string, r: JobResult, patchPath?: string): string {
  const n = filesChangedCount(r);
  const line = `patchbay: job ${id} ${r.status}${r.error ? `: ${short(r.error, 300)}` : ""}; ${count(n, "file")} changed${patchPath ? `; patch: ${patchPath}` : ""}`;
  return safeText(line, { oneLine: true });
}

/**
 * An event as progress lines: mostly one, several for an event that lists things (a line per
 * candidate picked among), joined by newlines; undefined for an event not shown.
 */
export function formatEvent(e: TranscriptEvent, opts: { verbose?: boolean } = {}): string | undefined {
  const out = format(e, opts);
  if (out === undefined) return undefined;
  // Again on each whole line: it also covers the fields printed as they are (names, ids, statuses),
  // and no text in a line can start a line of its own (only this join makes a newline).
  return (typeof out === "string" ? [out] : out).map((line) => safeText(line, { oneLine: true })).join("\n");
}

function format(e: TranscriptEvent, opts: { verbose?: boolean }): string | string[] | undefined {
  const t = e.ts.slice(11, 19);
  switch (e.type) {
    case "job_started":
      return `${t} job ${e.jobId} attempt ${e.attempt}: ${short(e.spec.task, 80)}${e.scripted ? ` (model ${short(e.model ?? "scripted", 60)}: SCRIPTED, not priced)` : ""}`;
    case "sandbox_ready":
      return `${t} sandbox ${e.container} ready in ${e.ms} ms`;
    case "setup":
      // 124 is what a command killed by its time limit, or by the job's cancel or timeout, reports.
      return `${t} setup: ${short(e.command, 60)} → ${e.exitCode === 124 ? "stopped (timed out or cancelled)" : `exit ${e.exitCode}`} (${e.ms} ms)`;
    case "model_response": {
      const u = e.usage;
      const tools = e.content.filter((b) => (b as { type?: string }).type === "tool_use").length;
      return `${t} turn ${e.turn}: ${count(tools, "tool call")}, ${k(u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens)} in (${k(u.cacheReadTokens)} cached) / ${k(u.outputTokens)} out, ${e.ms} ms [${e.stopReason}]`;
    }
    case "model_retry":
      return `${t} model API: ${e.error}; retry ${e.retry}`;
    case "tool_call": {
      const input = e.input as Record<string, unknown>;
      // A spec's own tool or an MCP server's: its input as JSON, and the server.
      const what =
        e.name === "bash"
          ? field(input.command ?? (input.restart ? "(restart)" : ""))
          : BUILTIN_TOOL_NAMES.includes(e.name)
            ? `${field(input.command ?? "")} ${field(input.path ?? "")}`
            : JSON.stringify(e.input ?? null, (_k, v: unknown) =>
                typeof v === "string" ? safeText(v, { oneLine: true }) : v,
              );
      return `${t}   ${e.server ? `${e.name} (MCP server ${short(e.server, 40)})` : e.name}: ${short(what, 90)}`;
    }
    case "tool_result":
      if (!e.isError && !opts.verbose) return undefined;
      return `${t}   ${e.isError ? "✗" : "→"} ${short(e.output, 100)} (${e.ms} ms)`;
    case "verify":
      return `${t} verify: ${short(e.command, 60)} → exit ${e.exitCode}`;
    case "patch": {
      const n = e.filesChangedTotal ?? e.filesChanged.length;
      return `${t} patch: ${count(n, "file")}, ${count(e.bytes, "byte")}`;
    }
    case "egress": {
      // A request inside a terminated tunnel names its path, its status and the credential added (by name).
      const what = `${e.method} ${short(e.host, 60)}:${e.port}${e.path !== undefined ? short(e.path, 60) : ""}`;
      const added = e.credential !== undefined ? `, credential ${short(e.credential, 40)} added` : "";
      const status = e.status !== undefined && e.path !== undefined ? `${e.status}, ` : "";
      return `${t} egress: ${what} ${e.allowed ? `allowed, ${status}${e.bytesUp} B up / ${e.bytesDown} B down${added}` : `refused: ${short(e.reason ?? "", 80)}${added ? " (credential not added)" : ""}`}`;
    }
    case "instructions_loaded":
      return `${t} the repository's instructions: ${e.files.length ? `${short(e.files.join(", "), 80)} (${count(e.bytes, "byte")}${e.cut ? ", cut at the bound" : ""})` : "none"}${e.refused?.length ? `; left out: ${short(e.refused.map((r) => r.path).join(", "), 60)}` : ""}`;
    case "candidates_started":
      return `${t} setup done once; ${count(e.jobIds.length, "candidate")} started from its workspace (${count(e.seedBytes, "byte")}): ${short(e.jobIds.join(", "), 80)}`;
    case "candidate_picked":
      return [
        `${t} ${e.picked !== undefined ? `picked candidate ${e.picked}` : "no candidate picked"}: ${short(e.why, 120)}`,
        ...e.candidates.map((c) => `${t}   ${e.picked === c.n ? "*" : " "} ${candidateLine(c)}`),
      ];
    case "context_trimmed":
      return `${t} context: ${count(e.removedChars, "character")} of old tool output shortened`;
    case "context_compacted":
      return `${t} context: ${count(e.turnsDropped, "older turn")} compacted into a summary, ~${k(e.tokensBefore)} → ~${k(e.tokensAfter)} ${plural(e.tokensAfter, "token")}${e.reason === "prompt_too_long" ? " (the API refused the request as too long)" : ""}`;
    case "budget":
      return `${t} budget ${e.limit} exceeded: ${e.used} > ${e.max}`;
    case "resume":
      return `${t} ${e.restored ? `resumed from attempt ${e.fromAttempt}'s checkpoint after turn ${e.turns} (${usd(e.costUsd)} spent before)` : `no resume: ${short(e.reason ?? "", 100)}`}`;
    case "checkpoint":
      return `${t} checkpoint not stored: ${short(e.reason ?? "", 100)}`;
    case "job_finished":
      return `${t} finished: ${e.status}${e.error ? ` (${short(e.error, 80)})` : ""}, ${count(e.turns, "turn")}, ${e.scripted ? "scripted (not priced)" : usd(e.costUsd)}`;
    default:
      return opts.verbose ? `${t} ${e.type}` : undefined;
  }
}

/** A candidate's outcome in a few words: number, job, status, verify, cost, turns, patch, error. */
function candidateLine(c: CandidateOutcome): string {
  const verified = c.verified === undefined ? "not verified" : c.verified ? "verified" : "verify failed";
  return `${c.n}. ${short(c.jobId, 140)} ${short(c.status, 20)}, ${verified}, ${usd(c.costUsd)}, ${count(c.turns, "turn")}, ${count(c.patchBytes, "byte")} in ${count(c.filesChanged, "file")}${c.error ? ` (${short(c.error, 80)})` : ""}`;
}

/** A number from a stored result, shown as it is, or "?" (the result is read from Redis as JSON, unchecked). */
const shownNumber = (n: unknown): string => (typeof n === "number" && Number.isFinite(n) ? String(n) : "?");

/**
 * `patchbay result --candidates`: a row per candidate of a job (number, job id, status, verified
 * yes/no/-, cost, turns, patch bytes, files changed, error; the picked one marked `*`), then which
 * was picked and why (`why`: the transcript's `candidate_picked`, when there). Every text in it (job
 * ids, statuses, errors, the reason) is made inert and one line (short).
 */
export function candidatesTable(cs: readonly CandidateOutcome[], picked?: number, why?: string): string {
  const rows = cs.map((c) => [
    c.n === picked ? "*" : "",
    shownNumber(c.n),
    short(String(c.jobId), 140),
    short(String(c.status), 20),
    c.verified === undefined ? "-" : c.verified ? "yes" : "no",
    usd(c.costUsd),
    shownNumber(c.turns),
    shownNumber(c.patchBytes),
    shownNumber(c.filesChanged),
    c.error ? short(String(c.error), 80) : "",
  ]);
  const all = [["", "N", "JOB", "STATUS", "VERIFIED", "COST", "TURNS", "PATCH BYTES", "FILES", "ERROR"], ...rows];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const lines = all.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
  const head = picked !== undefined ? `picked: candidate ${picked} (*)` : "picked: none";
  lines.push(why !== undefined ? `${head}: ${short(why, 300)}` : head);
  return lines.join("\n");
}
