// One line of progress per transcript event, for `patchbay run` and `patchbay watch`.
// Every string in an event may come from a hostile repo or model (task, commands, tool output and input,
// file names, errors): nothing in it may reach the terminal as a control sequence (see term.ts).
import type { TranscriptEvent } from "../spec.js";
import { safeText } from "../term.js";

/** Sanitized first, so an escape sequence neither uses up the length nor gets cut in two. */
const short = (s: string, n = 110) => {
  const one = safeText(s, { oneLine: true }).replace(/\s+/g, " ").trim();
  if (one.length <= n) return one;
  const cut = /[\ud800-\udbff]/.test(one[n - 2] ?? "") ? n - 2 : n - 1; // never half a surrogate pair
  return `${one.slice(0, cut)}…`;
};
const k = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));

export function formatEvent(e: TranscriptEvent, opts: { verbose?: boolean } = {}): string | undefined {
  const line = format(e, opts);
  // Again on the whole line: it also covers the fields printed as they are (names, ids, statuses).
  return line === undefined ? undefined : safeText(line, { oneLine: true });
}

function format(e: TranscriptEvent, opts: { verbose?: boolean }): string | undefined {
  const t = e.ts.slice(11, 19);
  switch (e.type) {
    case "job_started":
      return `${t} job ${e.jobId} attempt ${e.attempt}: ${short(e.spec.task, 80)}`;
    case "sandbox_ready":
      return `${t} sandbox ${e.container} ready in ${e.ms} ms`;
    case "setup":
      return `${t} setup: ${short(e.command, 60)} → exit ${e.exitCode} (${e.ms} ms)`;
    case "model_response": {
      const u = e.usage;
      const tools = e.content.filter((b) => (b as { type?: string }).type === "tool_use").length;
      return `${t} turn ${e.turn}: ${tools} tool call${tools === 1 ? "" : "s"}, ${k(u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens)} in (${k(u.cacheReadTokens)} cached) / ${k(u.outputTokens)} out, ${e.ms} ms [${e.stopReason}]`;
    }
    case "model_retry":
      return `${t} model API: ${e.error}; retry ${e.retry}`;
    case "tool_call": {
      const input = e.input as Record<string, unknown>;
      const what = e.name === "bash" ? String(input.command ?? (input.restart ? "(restart)" : "")) : `${input.command ?? ""} ${input.path ?? ""}`;
      return `${t}   ${e.name}: ${short(what, 90)}`;
    }
    case "tool_result":
      if (!e.isError && !opts.verbose) return undefined;
      return `${t}   ${e.isError ? "✗" : "→"} ${short(e.output, 100)} (${e.ms} ms)`;
    case "verify":
      return `${t} verify: ${short(e.command, 60)} → exit ${e.exitCode}`;
    case "patch":
      return `${t} patch: ${e.filesChangedTotal ?? e.filesChanged.length} files, ${e.bytes} bytes`;
    case "egress":
      return `${t} egress: ${e.method} ${short(e.host, 60)}:${e.port} ${e.allowed ? `allowed, ${e.bytesUp} B up / ${e.bytesDown} B down` : `refused: ${short(e.reason ?? "", 80)}`}`;
    case "context_trimmed":
      return `${t} context: ${e.removedChars} characters of old tool output shortened`;
    case "budget":
      return `${t} budget ${e.limit} exceeded: ${e.used} > ${e.max}`;
    case "resume":
      return `${t} ${e.restored ? `resumed from attempt ${e.fromAttempt}'s checkpoint after turn ${e.turns} ($${e.costUsd.toFixed(4)} spent before)` : `no resume: ${short(e.reason ?? "", 100)}`}`;
    case "checkpoint":
      return `${t} checkpoint not stored: ${short(e.reason ?? "", 100)}`;
    case "job_finished":
      return `${t} finished: ${e.status}${e.error ? ` (${short(e.error, 80)})` : ""}, ${e.turns} turns, $${e.costUsd.toFixed(4)}`;
    default:
      return opts.verbose ? `${t} ${e.type}` : undefined;
  }
}
