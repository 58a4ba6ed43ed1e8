// What a job may leave in Redis: a result and transcript events of bounded size, whatever the agent
// did (300,000 new files make a ~45 MB patch, a 3 MB file list and a 6 MB diffstat). Pure: the worker
// applies it where results and events enter Redis (src/queue/result-record.ts).
//
// - `filesChanged`: the first entries that fit (count and bytes), with `filesChangedTotal` and
//   `filesChangedCut` when some were left out. The same in `patch` events.
// - `diffstat`: the first lines that fit, a line saying how many were cut, and git's summary line
//   (`N files changed, …`); `diffstatCut` counts the lines left out.
// - `patch`: never cut (a cut patch does not apply). Over `patchInlineBytes` it is taken out of the
//   result and kept once under its own key; the result says so in `patchStored` (bytes, sha256), and
//   the client puts it back (attachPatch).
// - Free texts (summary, error, outputs, egress fields): cut with a note of how much was cut.
// Sizes are bytes of JSON string content, so escapes (a control byte is 6) count as what they cost.
import { count } from "../core/count.js";
import { createHash } from "node:crypto";
import type { EventOf, JobResult, TranscriptEvent } from "../core/spec/spec.js";
import { kinded } from "../core/errors.js";

export const BOUNDS = {
  /** A patch longer than this (as JSON) is stored once under its own key instead of in the result. */
  patchInlineBytes: 16 * 1024,
  filesChangedEntries: 500,
  filesChangedBytes: 8 * 1024,
  diffstatBytes: 8 * 1024,
  summaryBytes: 8 * 1024,
  errorBytes: 4 * 1024,
  /** verify/setup output tails and commands in results and events. */
  outputBytes: 4 * 1024,
  /** Reasons and errors of the smaller events (egress, checkpoint, resume, model_retry). */
  reasonBytes: 1024,
  /** A DNS name's limit; egress events' host. */
  hostBytes: 253,
  /** stopReason, jobId, egress method, address and credential name. */
  shortBytes: 256,
  /** No bounded result is larger than this (JSON): the sum of the bounds above, and room for the numbers. */
  resultBytes: 64 * 1024,
} as const;

/** Bytes of `s` as the content of a JSON string (what JSON.stringify writes between the quotes). */
function unitBytes(cp: number): number {
  if (cp === 0x22 || cp === 0x5c) return 2;
  if (cp < 0x20) return cp === 8 || cp === 9 || cp === 10 || cp === 12 || cp === 13 ? 2 : 6;
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp >= 0xd800 && cp <= 0xdfff) return 6; // a lone surrogate is written as \uXXXX
  return cp < 0x10000 ? 3 : 4;
}

export function jsonBytes(s: string): number {
  // Cheap exits first: most strings are ASCII without escapes.
  const raw = Buffer.byteLength(s);
  if (raw === s.length && !/["\\\u0000-\u001f]/.test(s)) return raw;
  return Buffer.byteLength(JSON.stringify(s)) - 2;
}

/** The longest head of `s` that is at most `max` JSON bytes; never splits a surrogate pair. */
function head(s: string, max: number): string {
  let n = 0;
  let i = 0;
  while (i < s.length) {
    const cp = s.codePointAt(i)!;
    const b = unitBytes(cp);
    if (n + b > max) break;
    n += b;
    i += cp > 0xffff ? 2 : 1;
  }
  return s.slice(0, i);
}

/** The longest tail of `s` that is at most `max` JSON bytes. */
function tail(s: string, max: number): string {
  let n = 0;
  let i = s.length;
  while (i > 0) {
    const lo = s.charCodeAt(i - 1);
    const pair =
      i > 1 && lo >= 0xdc00 && lo <= 0xdfff && s.charCodeAt(i - 2) >= 0xd800 && s.charCodeAt(i - 2) <= 0xdbff;
    const b = pair ? 4 : unitBytes(lo);
    if (n + b > max) break;
    n += b;
    i -= pair ? 2 : 1;
  }
  return s.slice(i);
}

/**
 * `s` cut to at most `max` JSON bytes, keeping its start, its end, or both, with a note of how many
 * characters were cut. Unchanged when it fits.
 */
export function cutText(s: string, max: number, keep: "head" | "tail" | "both" = "both"): string {
  if (jsonBytes(s) <= max) return s;
  const note = (cut: number) => `[… ${count(cut, "character")} cut …]`;
  const room = Math.max(0, max - jsonBytes(note(s.length)) - 4); // the note and two newlines (2 JSON bytes each)
  if (keep === "head") {
    const h = head(s, room);
    return `${h}\n${note(s.length - h.length)}`;
  }
  if (keep === "tail") {
    const t = tail(s, room);
    return `${note(s.length - t.length)}\n${t}`;
  }
  const h = head(s, Math.floor(room / 2));
  const t = tail(s.slice(h.length), room - jsonBytes(h));
  return `${h}\n${note(s.length - h.length - t.length)}\n${t}`;
}

export interface CutList {
  kept: string[];
  /** Entries left out (0: the list is whole). */
  cut: number;
}

/** The first entries of `list` within `maxEntries` and `maxBytes` of JSON (each entry costs its quotes and comma too). */
export function cutList(
  list: readonly string[],
  maxEntries = BOUNDS.filesChangedEntries,
  maxBytes = BOUNDS.filesChangedBytes,
): CutList {
  let bytes = 0;
  let n = 0;
  for (; n < list.length && n < maxEntries; n++) {
    const b = jsonBytes(list[n]!) + 3;
    if (bytes + b > maxBytes) break;
    bytes += b;
  }
  return { kept: n === list.length ? [...list] : list.slice(0, n), cut: list.length - n };
}

const SUMMARY_LINE = /^\s*\d+ files? changed\b/;

/**
 * A `git diff --stat` cut to at most `max` JSON bytes: its first lines, a line saying how many were
 * cut, and git's summary line when the stat has one. `cut` counts the file lines left out.
 */
export function cutDiffstat(stat: string, max = BOUNDS.diffstatBytes): { text: string; cut: number } {
  if (jsonBytes(stat) <= max) return { text: stat, cut: 0 };
  const lines = stat.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const last = lines.at(-1) ?? "";
  const summary = SUMMARY_LINE.test(last) ? cutText(last, 512, "head") : undefined;
  const body = summary === undefined ? lines : lines.slice(0, -1);
  const marker = (n: number) => ` ... ${count(n, "more line")} cut (the patch has them all)`;
  let room = max - (summary === undefined ? 0 : jsonBytes(summary) + 2) - jsonBytes(marker(body.length)) - 2;
  let n = 0;
  for (; n < body.length; n++) {
    const b = jsonBytes(body[n]!) + 2; // and its newline
    if (b > room) break;
    room -= b;
  }
  const kept = body
    .slice(0, n)
    .map((l) => `${l}\n`)
    .join("");
  return {
    text: `${kept}${marker(body.length - n)}\n${summary === undefined ? "" : `${summary}\n`}`,
    cut: body.length - n,
  };
}

export const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

export interface BoundedResult {
  /** What goes into Redis (and BullMQ's returnvalue). */
  result: JobResult;
  /** The patch, when it is to be kept under its own key (result.patchStored says so). */
  patch?: string;
}

type Lists = {
  filesChanged: string[];
  diffstat: string;
  filesChangedTotal?: number;
  filesChangedCut?: number;
  diffstatCut?: number;
};

/** filesChanged and diffstat bounded, with the counts of what was cut (kept from an earlier bound). */
function boundLists<T extends Lists>(x: T): T {
  const files = cutList(x.filesChanged);
  const stat = cutDiffstat(x.diffstat);
  const total = x.filesChangedTotal ?? x.filesChanged.length;
  const filesCut = total - files.kept.length;
  const statCut = (x.diffstatCut ?? 0) + stat.cut;
  const { filesChangedTotal: _t, filesChangedCut: _c, diffstatCut: _d, ...rest } = x;
  return {
    ...rest,
    filesChanged: files.kept,
    diffstat: stat.text,
    ...(filesCut > 0 ? { filesChangedTotal: total, filesChangedCut: filesCut } : {}),
    ...(statCut > 0 ? { diffstatCut: statCut } : {}),
  } as T;
}

/** A result as it may be stored: lists and texts bounded, a long patch taken out (see the header). */
export function boundResult(r: JobResult): BoundedResult {
  const out: JobResult = boundLists({ ...r });
  let patch: string | undefined;
  if (
    !r.patchStored &&
    (Buffer.byteLength(r.patch) > BOUNDS.patchInlineBytes || jsonBytes(r.patch) > BOUNDS.patchInlineBytes)
  ) {
    patch = r.patch;
    out.patch = "";
    out.patchStored = { bytes: Buffer.byteLength(patch), sha256: sha256(patch) };
  }
  if (out.summary !== undefined) out.summary = cutText(out.summary, BOUNDS.summaryBytes, "both");
  if (out.error !== undefined) out.error = cutText(out.error, BOUNDS.errorBytes, "both");
  if (out.verify)
    out.verify = { ...out.verify, outputTail: cutText(out.verify.outputTail, BOUNDS.outputBytes, "tail") };
  if (out.stopReason !== null) out.stopReason = cutText(out.stopReason, BOUNDS.shortBytes, "head");
  if (out.jobId !== undefined) out.jobId = cutText(out.jobId, BOUNDS.shortBytes, "head");
  return patch === undefined ? { result: out } : { result: out, patch };
}

/** Thrown by attachPatch: the stored patch is gone (past its retention) or is not this result's. */
export class PatchGoneError extends kinded("not-found") {}

/** A stored result made whole again with its patch (from its key); a result with its patch inline is returned as it is. */
export function attachPatch(r: JobResult, patch: string | null | undefined, where = "Redis"): JobResult {
  const ref = r.patchStored;
  if (!ref) return r;
  if (patch === null || patch === undefined)
    throw new PatchGoneError(
      `the patch of job ${r.jobId ?? "?"} (${count(ref.bytes, "byte")}) is no longer in ${where}: it was kept for PATCHBAY_RETENTION_SEC after the job ended`,
    );
  if (Buffer.byteLength(patch) !== ref.bytes || sha256(patch) !== ref.sha256)
    throw new PatchGoneError(
      `the patch stored for job ${r.jobId ?? "?"} is not the one its result names (sha256 ${ref.sha256.slice(0, 12)}…): the job ran again since`,
    );
  const { patchStored: _, ...rest } = r;
  return { ...rest, patch };
}

/** A transcript event as it may be stored: the lists of `patch` events and every free text bounded. */
export function boundEvent(e: TranscriptEvent): TranscriptEvent {
  const cut = (s: string | undefined, max: number, keep: "head" | "tail" | "both" = "both") =>
    s === undefined ? undefined : cutText(s, max, keep);
  switch (e.type) {
    case "patch":
      return boundLists<EventOf<"patch">>(e);
    case "setup":
    case "verify":
      return {
        ...e,
        command: cutText(e.command, BOUNDS.outputBytes, "both"),
        outputTail: cutText(e.outputTail, BOUNDS.outputBytes, "tail"),
      };
    case "job_finished":
      return e.error === undefined ? e : { ...e, error: cutText(e.error, BOUNDS.errorBytes, "both") };
    case "egress": {
      const reason = cut(e.reason, BOUNDS.reasonBytes);
      const address = cut(e.address, BOUNDS.shortBytes, "head");
      const path = cut(e.path, BOUNDS.reasonBytes, "head");
      const credential = cut(e.credential, BOUNDS.shortBytes, "head");
      return {
        ...e,
        host: cutText(e.host, BOUNDS.hostBytes, "head"),
        method: cutText(e.method, BOUNDS.shortBytes, "head"),
        ...(reason !== undefined ? { reason } : {}),
        ...(address !== undefined ? { address } : {}),
        ...(path !== undefined ? { path } : {}),
        ...(credential !== undefined ? { credential } : {}),
      };
    }
    case "model_retry":
      return { ...e, error: cutText(e.error, BOUNDS.reasonBytes, "both") };
    case "checkpoint":
    case "resume":
      return e.reason === undefined ? e : { ...e, reason: cutText(e.reason, BOUNDS.reasonBytes, "both") };
    default:
      // The conversation (model_*, tool_*) is kept whole so that it can be replayed: its size is
      // bounded where it is made (the tools' output limits, the API's max_tokens).
      return e;
  }
}
