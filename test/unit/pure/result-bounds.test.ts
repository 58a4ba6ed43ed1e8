// The bounds on what a job leaves in Redis (src/queue/result-bounds.ts), pure: lists cut with the cut
// counted, a long patch taken out and put back whole, texts cut by their JSON size (escapes count),
// never a split surrogate pair, and a stored result under BOUNDS.resultBytes whatever it held.
import { describe, expect, it } from "vitest";
import {
  attachPatch,
  BOUNDS,
  boundEvent,
  boundResult,
  cutDiffstat,
  cutList,
  cutText,
  jsonBytes,
  PatchGoneError,
  sha256,
} from "../../../src/queue/result-bounds.js";
import {
  emptyResult,
  filesChangedCount,
  JobResult,
  TranscriptEvent,
  type EventOf,
} from "../../../src/core/spec/spec.js";

const names = (n: number) => Array.from({ length: n }, (_, i) => `many/f${String(i + 1).padStart(6, "0")}`);
const stat = (files: string[]) =>
  `${files.map((f) => ` ${f} | 0\n`).join("")} ${files.length} files changed, 0 insertions(+), 0 deletions(-)\n`;
const patchOf = (files: string[]) =>
  files
    .map(
      (f) =>
        `diff --git a/${f} b/${f}\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\n`,
    )
    .join("");
const result = (files: string[], extra: Partial<JobResult> = {}): JobResult => ({
  ...emptyResult("completed", "", { jobId: "j1" }),
  patch: patchOf(files),
  diffstat: stat(files),
  filesChanged: files,
  error: undefined,
  ...extra,
});
const size = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

describe("cutText", () => {
  it("leaves a text that fits as it is", () => {
    expect(cutText("short", 100)).toBe("short");
    expect(cutText("x".repeat(100), 100)).toBe("x".repeat(100));
  });

  it("cuts to the bound in JSON bytes, keeping head, tail or both, and says how much was cut", () => {
    const s = `${"a".repeat(5000)}${"b".repeat(5000)}`;
    for (const keep of ["head", "tail", "both"] as const) {
      const c = cutText(s, 1000, keep);
      expect(jsonBytes(c)).toBeLessThanOrEqual(1000);
      const cut = Number(/\[… (\d+) characters cut …\]/.exec(c)![1]);
      expect(c.length - c.match(/\n?\[… \d+ characters cut …\]\n?/)![0].length + cut).toBe(s.length);
      if (keep !== "tail") expect(c.startsWith("aaa")).toBe(true);
      if (keep !== "head") expect(c.endsWith("bbb")).toBe(true);
    }
  });

  it("counts escapes as what they cost: 1,000 control bytes are 6,000 bytes of JSON", () => {
    const s = "\u0001".repeat(1000);
    expect(jsonBytes(s)).toBe(6000);
    const c = cutText(s, 600, "head");
    expect(Buffer.byteLength(JSON.stringify(c)) - 2).toBeLessThanOrEqual(600);
    expect(jsonBytes('a"b\\c\n')).toBe(Buffer.byteLength(JSON.stringify('a"b\\c\n')) - 2);
  });

  it("never splits a surrogate pair, at either end", () => {
    const s = "😀".repeat(1000);
    for (const keep of ["head", "tail", "both"] as const) {
      const c = cutText(s, 301, keep);
      expect(c.replace(/\n?\[… \d+ characters cut …\]\n?/, "")).toMatch(/^(😀)*$/u);
      expect(jsonBytes(c)).toBeLessThanOrEqual(301);
    }
  });
});

describe("cutList and cutDiffstat", () => {
  it("keeps the first entries within the count and the bytes, and counts the rest", () => {
    expect(cutList(names(10))).toEqual({ kept: names(10), cut: 0 });
    const c = cutList(names(300_000));
    expect(c.kept).toEqual(names(c.kept.length));
    expect(c.kept.length).toBe(BOUNDS.filesChangedEntries);
    expect(c.cut).toBe(300_000 - c.kept.length);
    const long = Array.from({ length: 100 }, (_, i) => `${i}-${"d/".repeat(1000)}x`);
    const l = cutList(long);
    expect(size(l.kept)).toBeLessThanOrEqual(BOUNDS.filesChangedBytes);
    expect(l.kept.length + l.cut).toBe(100);
  });

  it("keeps a diffstat's first lines and git's summary line, with a line saying how many were cut", () => {
    const s = cutDiffstat(stat(names(300_000)));
    expect(jsonBytes(s.text)).toBeLessThanOrEqual(BOUNDS.diffstatBytes);
    expect(s.text.startsWith(" many/f000001 | 0\n many/f000002 | 0\n")).toBe(true);
    expect(
      s.text.endsWith(
        ` ... ${s.cut} more lines cut (the patch has them all)\n 300000 files changed, 0 insertions(+), 0 deletions(-)\n`,
      ),
    ).toBe(true);
    const kept = s.text.split("\n").filter((l) => / \| 0$/.test(l)).length;
    expect(kept + s.cut).toBe(300_000);
    expect(cutDiffstat(stat(names(3)))).toEqual({ text: stat(names(3)), cut: 0 });
  });

  it("a diffstat already cut at its source (no summary line) keeps its head", () => {
    const s = cutDiffstat(
      names(100_000)
        .map((f) => ` ${f} | 0\n`)
        .join(""),
    );
    expect(jsonBytes(s.text)).toBeLessThanOrEqual(BOUNDS.diffstatBytes);
    expect(s.text).toMatch(/ \.\.\. \d+ more lines cut \(the patch has them all\)\n$/);
  });
});

describe("boundResult and attachPatch", () => {
  it("a small result is stored as it is", () => {
    const r = result(names(3), { summary: "ok", verify: { exitCode: 0, outputTail: "OK" }, verified: true });
    expect(boundResult(r)).toEqual({ result: r });
  });

  it("300,000 files: lists cut and counted, the patch taken out once and put back whole", () => {
    const files = names(300_000);
    const r = result(files);
    const b = boundResult(r);
    expect(size(b.result)).toBeLessThanOrEqual(BOUNDS.resultBytes);
    expect(b.result.patch).toBe("");
    expect(b.patch).toBe(r.patch);
    expect(b.result.patchStored).toEqual({ bytes: Buffer.byteLength(r.patch), sha256: sha256(r.patch) });
    expect(b.result.filesChangedTotal).toBe(300_000);
    expect(b.result.filesChangedCut).toBe(300_000 - b.result.filesChanged.length);
    expect(filesChangedCount(b.result)).toBe(300_000);
    expect(b.result.diffstatCut).toBeGreaterThan(299_000);
    expect(JobResult.safeParse(b.result).success).toBe(true);
    // bounding again changes nothing (a recorded result returned by a later attempt)
    expect(boundResult(b.result)).toEqual({ result: b.result });
    const whole = attachPatch(b.result, b.patch);
    expect(whole.patch).toBe(r.patch);
    expect(whole.patchStored).toBeUndefined();
    expect(whole.filesChangedTotal).toBe(300_000);
  });

  it("a patch just over the inline bound is stored, one at it is not; escapes count", () => {
    const at = { ...result([]), patch: "x".repeat(BOUNDS.patchInlineBytes) };
    expect(boundResult(at).patch).toBeUndefined();
    const over = { ...result([]), patch: "x".repeat(BOUNDS.patchInlineBytes + 1) };
    expect(boundResult(over).patch).toBe(over.patch);
    const escaped = { ...result([]), patch: "\u0001".repeat(BOUNDS.patchInlineBytes / 4) };
    expect(boundResult(escaped).patch).toBe(escaped.patch);
  });

  it("a missing or foreign stored patch is an error, never an empty patch", () => {
    const b = boundResult(result(names(2000)));
    expect(() => attachPatch(b.result, null)).toThrow(PatchGoneError);
    expect(() => attachPatch(b.result, null)).toThrow(/no longer in Redis: it was kept for PATCHBAY_RETENTION_SEC/);
    expect(() => attachPatch(b.result, `${b.patch!.slice(1)}y`)).toThrow(/not the one its result names/);
    const inline = result(names(1));
    expect(attachPatch(inline, null)).toBe(inline);
  });

  it("every free text is cut: whatever a result holds, it is stored under BOUNDS.resultBytes", () => {
    const huge = "\u0001".repeat(2_000_000);
    const files = Array.from({ length: 1000 }, () => `"${"\u0002".repeat(3000)}`);
    const r: JobResult = {
      ...result(files),
      patch: huge,
      diffstat: huge,
      summary: huge,
      error: huge,
      stopReason: huge,
      jobId: huge,
      verify: { exitCode: 1, outputTail: huge },
    };
    const b = boundResult(r);
    expect(size(b.result)).toBeLessThanOrEqual(BOUNDS.resultBytes);
    expect(b.result.verify!.outputTail).toMatch(/^\[… \d+ characters cut …\]\n/);
    expect(b.result.filesChangedCut).toBe(1000 - b.result.filesChanged.length);
    expect(JobResult.safeParse(b.result).success).toBe(true);
  });
});

describe("boundEvent", () => {
  const base = { ts: "2026-01-01T00:00:00.000Z", jobId: "j1", attempt: 1 };

  it("a patch event's lists are cut and the cut counted; a small one is unchanged", () => {
    const files = names(300_000);
    const e: EventOf<"patch"> = {
      ...base,
      type: "patch",
      filesChanged: files,
      diffstat: stat(files),
      bytes: 45_000_000,
    };
    const b = boundEvent(e) as EventOf<"patch">;
    expect(size(b)).toBeLessThanOrEqual(BOUNDS.filesChangedBytes + BOUNDS.diffstatBytes + 1024);
    expect(b.filesChangedTotal).toBe(300_000);
    expect(b.filesChangedCut).toBe(300_000 - b.filesChanged.length);
    expect(b.diffstatCut).toBeGreaterThan(299_000);
    expect(TranscriptEvent.safeParse(b).success).toBe(true);
    const small: EventOf<"patch"> = { ...base, type: "patch", filesChanged: ["a"], diffstat: stat(["a"]), bytes: 10 };
    expect(boundEvent(small)).toEqual(small);
  });

  it("free texts of events are cut: an egress host to 253 bytes, errors, outputs, reasons", () => {
    const big = "h".repeat(16 * 1024);
    const eg = boundEvent({
      ...base,
      type: "egress",
      host: big,
      port: 443,
      method: big,
      allowed: false,
      reason: big,
      address: big,
      path: big,
      credential: big,
      bytesUp: 0,
      bytesDown: 0,
      ms: 1,
    }) as EventOf<"egress">;
    expect(jsonBytes(eg.host)).toBeLessThanOrEqual(BOUNDS.hostBytes);
    for (const f of [eg.method, eg.reason!, eg.address!, eg.path!, eg.credential!])
      expect(jsonBytes(f)).toBeLessThanOrEqual(BOUNDS.reasonBytes);
    expect(jsonBytes(eg.credential!)).toBeLessThanOrEqual(BOUNDS.shortBytes);
    for (const e of [
      { ...base, type: "verify", command: big, exitCode: 1, outputTail: big, ms: 1 },
      { ...base, type: "setup", command: big, exitCode: 1, outputTail: big, ms: 1 },
      { ...base, type: "job_finished", status: "failed", costUsd: 0, turns: 0, error: big },
      { ...base, type: "model_retry", retry: 1, error: big },
      { ...base, type: "checkpoint", turn: 1, saved: false, reason: big },
    ] as TranscriptEvent[]) {
      const b = boundEvent(e);
      expect(size(b), e.type).toBeLessThanOrEqual(2 * BOUNDS.outputBytes + 512);
      expect(TranscriptEvent.safeParse(b).success).toBe(true);
    }
  });

  it("the conversation is kept whole (it is replayed)", () => {
    const e: TranscriptEvent = {
      ...base,
      type: "tool_result",
      turn: 1,
      toolUseId: "t",
      name: "bash",
      output: "x".repeat(100_000),
      isError: false,
      ms: 1,
    };
    expect(boundEvent(e)).toBe(e);
  });
});
