// Escaping and preparation shared by the dashboard and the static viewer. Everything in a transcript
// is untrusted (repo files, tool output and model text are attacker-controlled): it is made inert
// here before any page sees it, and the pages put it in the DOM with textContent only.
import { createHash } from "node:crypto";
import { costUsd } from "../agent/prices.js";
import { safeText } from "../core/term.js";
import type { TranscriptEvent } from "../core/spec/spec.js";

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text for an HTML text node or a quoted attribute value. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/**
 * JSON for a `<script type="application/json">` block: no `<`, `>` or `&` (so neither `</script>`
 * nor `<!--` can end or change the block) and no U+2028/U+2029. JSON.parse of the block's text gives
 * the value back exactly.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/** The CSP source for an inline script or style: `'sha256-…'` of its exact text. */
export function cspHash(text: string): string {
  return `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`;
}

/** Every string in a JSON value (keys too) without terminal escapes, controls or bidi overrides (safeText). */
export function sanitizeDeep(v: unknown, depth = 0): unknown {
  if (typeof v === "string") return safeText(v);
  if (v === null || typeof v !== "object") return v;
  if (depth > 64) return "[too deeply nested]";
  if (Array.isArray(v)) return v.map((x) => sanitizeDeep(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[safeText(k)] = sanitizeDeep(x, depth + 1);
  return out;
}

/** A transcript event as the pages get it: inert strings, and `costUsd` on each model_response. */
export type ViewEvent = TranscriptEvent & { costUsd?: number };

export function prepareEvent(e: TranscriptEvent): ViewEvent {
  const clean = sanitizeDeep(e) as ViewEvent;
  if (e.type === "model_response" && e.usage) {
    try {
      clean.costUsd = costUsd(e.model, e.usage);
    } catch {
      // a malformed usage is shown as it is, without a cost
    }
  }
  return clean;
}

/** Events from a JSONL text; bad lines are kept as `{ type: "unparsed", line }` so nothing is hidden. */
export function parseTranscriptJsonl(text: string): TranscriptEvent[] {
  const out: TranscriptEvent[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as TranscriptEvent);
    } catch {
      out.push({ type: "unparsed", line } as unknown as TranscriptEvent);
    }
  }
  return out;
}
