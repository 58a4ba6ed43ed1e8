// A job's candidates on a terminal: the table `patchbay result --candidates` prints (a row per
// candidate with its number, job id, status, verified, cost, turns, patch bytes, files changed and
// error, the picked one marked, then why it was picked) and the progress lines of the transcript's
// `candidates_started` and `candidate_picked` (`run`, `watch`). A candidate's error and job id come
// from the repo and the model: no terminal control reaches the screen and none starts a line.
import { describe, expect, it } from "vitest";
import { candidatesTable, formatEvent } from "../../../src/cli/format.js";
import { TranscriptEvent, type CandidateOutcome } from "../../../src/core/spec/spec.js";

const HOSTILE_ERROR = "boom \x1b]52;c;cm0gLXJmIH4=\x07\x1b[31mred\x1b[0m\x9b2J\rover\nforged line";
/** What a terminal would act on: C0 (newlines are the join's own, checked per line), DEL, C1. */
const CONTROL = /[\x00-\x1f\x7f-\x9f]/;

const CANDIDATES: CandidateOutcome[] = [
  {
    n: 1,
    jobId: "fix-7-C1",
    status: "verify_failed",
    verified: false,
    costUsd: 0.0123,
    turns: 6,
    patchBytes: 812,
    filesChanged: 2,
  },
  {
    n: 2,
    jobId: "fix-7-C2",
    status: "completed",
    verified: true,
    costUsd: 0.02,
    turns: 9,
    patchBytes: 340,
    filesChanged: 1,
  },
  {
    n: 3,
    jobId: "fix-7-C3",
    status: "failed",
    costUsd: 0,
    turns: 0,
    patchBytes: 0,
    filesChanged: 0,
    error: HOSTILE_ERROR,
  },
];
const WHY = "candidate 2 is the only one verify passed";

describe("the candidates table of `patchbay result --candidates`", () => {
  it("a row per candidate, the picked one marked, then why it was picked", () => {
    const lines = candidatesTable(CANDIDATES, 2, WHY).split("\n");
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/^ +N +JOB +STATUS +VERIFIED +COST +TURNS +PATCH BYTES +FILES +ERROR$/);
    expect(lines[1]!.split(/ {2,}/)).toEqual(["", "1", "fix-7-C1", "verify_failed", "no", "$0.012", "6", "812", "2"]);
    expect(lines[2]!.split(/ {2,}/)).toEqual(["*", "2", "fix-7-C2", "completed", "yes", "$0.02", "9", "340", "1"]);
    expect(lines[3]!.split(/ {2,}/).slice(0, 9)).toEqual(["", "3", "fix-7-C3", "failed", "-", "$0.00", "0", "0", "0"]);
    expect(lines[4]).toBe(`picked: candidate 2 (*): ${WHY}`);
    // the columns line up: each row's job id starts where the header's JOB does
    for (const l of lines.slice(1, 4)) expect(l.indexOf("fix-7-C")).toBe(lines[0]!.indexOf("JOB"));
  });

  it("a candidate's hostile error is one line of inert text in its row", () => {
    const lines = candidatesTable(CANDIDATES, 2, WHY).split("\n");
    expect(lines).toHaveLength(5); // the error's newline starts no line of its own
    for (const l of lines) expect(l).not.toMatch(CONTROL);
    expect(lines[3]).toMatch(/ boom red over forged line$/);
    expect(lines.join("\n")).not.toContain("cm0gLXJmIH4");
  });

  it("none picked says so, with why when the transcript gave it", () => {
    expect(
      candidatesTable(CANDIDATES, undefined, "none of the 3 candidates finished without failing").split("\n").at(-1),
    ).toBe("picked: none: none of the 3 candidates finished without failing");
    expect(candidatesTable(CANDIDATES).split("\n").at(-1)).toBe("picked: none");
  });

  it("a stored result's field that is not a number shows as ?, not as whatever it holds", () => {
    const odd = { ...CANDIDATES[0]!, turns: "\x1b[2J6" as unknown as number, costUsd: Number.NaN };
    const row = candidatesTable([odd], 1).split("\n")[1]!;
    expect(row.split(/ {2,}/)).toEqual(["*", "1", "fix-7-C1", "verify_failed", "no", "$?", "?", "812", "2"]);
  });
});

describe("the progress lines of a job with candidates", () => {
  const base = { ts: "2026-12-07T05:01:02.000Z", jobId: "fix-7", attempt: 1 };
  it("candidates_started: how many, the seed's size and their job ids", () => {
    const e = TranscriptEvent.parse({
      ...base,
      type: "candidates_started",
      jobIds: ["fix-7-C1", "fix-7-C2", "fix-7-C3"],
      seedBytes: 10_240,
    });
    expect(formatEvent(e)).toBe(
      "05:01:02 setup done once; 3 candidates started from its workspace (10240 bytes): fix-7-C1, fix-7-C2, fix-7-C3",
    );
  });

  it("candidate_picked: which and why, then one line per candidate, the picked one marked", () => {
    const e = TranscriptEvent.parse({ ...base, type: "candidate_picked", picked: 2, why: WHY, candidates: CANDIDATES });
    const lines = formatEvent(e)!.split("\n");
    expect(lines).toEqual([
      `05:01:02 picked candidate 2: ${WHY}`,
      "05:01:02     1. fix-7-C1 verify_failed, verify failed, $0.012, 6 turns, 812 bytes in 2 files",
      "05:01:02   * 2. fix-7-C2 completed, verified, $0.02, 9 turns, 340 bytes in 1 file",
      "05:01:02     3. fix-7-C3 failed, not verified, $0.00, 0 turns, 0 bytes in 0 files (boom red over forged line)",
    ]);
    for (const l of lines) expect(l).not.toMatch(CONTROL);
  });

  it("candidate_picked with none picked says so and why", () => {
    const why = `none of the 1 candidates finished without failing${HOSTILE_ERROR}`;
    const e = TranscriptEvent.parse({ ...base, type: "candidate_picked", why, candidates: [CANDIDATES[2]] });
    const lines = formatEvent(e)!.split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(
      "05:01:02 no candidate picked: none of the 1 candidates finished without failingboom red over forged line",
    );
    for (const l of lines) expect(l).not.toMatch(CONTROL);
  });
});
