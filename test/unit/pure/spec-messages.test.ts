// parseJobSpec's one-line messages, exactly: non-objects, throwing inputs, unknown keys with their
// "did you mean" (normalised, edit distance with transpositions, short keys stricter), paths with
// indexes, the repo union, setup items, job ids; and emptyResult. Pure.
import { describe, expect, it } from "vitest";
import {
  emptyResult,
  emptyUsage,
  filesChangedCount,
  finishedEvent,
  JobSpecError,
  MAX_COMMAND_CHARS,
  MAX_TASK_CHARS,
  parseJobSpec,
  stamped,
} from "../../../src/core/spec/spec.js";

const R = { path: "/r" };
const err = (input: unknown) => {
  const r = parseJobSpec(input);
  return r.ok ? "ok" : r.error.replace(/^invalid JobSpec: /, "");
};

describe("parseJobSpec messages", () => {
  it("a non-object", () => {
    expect(parseJobSpec("x")).toEqual({ ok: false, error: 'invalid JobSpec: must be an object (got "x")' });
    expect(err(null)).toBe("must be an object (got null)");
    expect(err([])).toBe("must be an object (got an array)");
    expect(err(5)).toBe("must be an object (got 5)");
  });

  it("an input that throws while read gives its message, on one line", () => {
    const thrower = {
      get task(): string {
        throw new Error("boom");
      },
      repo: R,
    };
    expect(parseJobSpec(thrower)).toEqual({ ok: false, error: "invalid JobSpec: boom" });
    const proxy = new Proxy(
      {},
      {
        get() {
          // The input under test throws something other than an Error while it is read.
          // eslint-disable-next-line @typescript-eslint/only-throw-error
          throw "str";
        },
        has() {
          // The input under test throws something other than an Error while it is read.
          // eslint-disable-next-line @typescript-eslint/only-throw-error
          throw "str";
        },
        ownKeys() {
          // The input under test throws something other than an Error while it is read.
          // eslint-disable-next-line @typescript-eslint/only-throw-error
          throw "str";
        },
      },
    );
    expect(parseJobSpec(proxy)).toEqual({ ok: false, error: "invalid JobSpec: str" });
  });

  it.each([
    [{ max_turns: 3 }, 'max_turns: unknown key (did you mean "maxTurns"?)'], // same once case, _ and - are ignored
    [{ Verify: "x" }, 'Verify: unknown key (did you mean "verify"?)'],
    [{ tsak: 1 }, 'tsak: unknown key (did you mean "task"?)'], // a transposition is one edit
    [{ txsz: 1 }, "txsz: unknown key"], // two edits on a short key: no guess
    [{ imaxx: "i" }, 'imaxx: unknown key (did you mean "image"?)'], // two edits on a longer key
    [{ zzzzzz: 1 }, "zzzzzz: unknown key"],
    [{ budget: { usdd: 1 } }, 'budget.usdd: unknown key (did you mean "usd"?)'],
    [{ limits: { memMb: 1 } }, "limits.memMb: unknown key"],
  ])("unknown key %o", (extra, message) => {
    expect(err({ task: "t", repo: R, ...extra })).toBe(message);
  });

  it("the repo union: the branch meant, a key of another branch, none or several kinds", () => {
    expect(err({ task: "t", repo: { path: 5 } })).toBe("repo.path: must be a non-empty path (got 5)");
    expect(err({ task: "t", repo: { path: "/r", ref: "v1" } })).toBe("repo.ref: only allowed with git");
    expect(err({ task: "t", repo: {} })).toBe(
      "repo: must be exactly one of { path }, { git, ref? }, { archive } (got none of them)",
    );
    expect(err({ task: "t", repo: { path: "/r", git: "g" } })).toBe(
      "repo: must be exactly one of { path }, { git, ref? }, { archive } (got path and git)",
    );
    expect(err({ task: "t", repo: "str" })).toBe(
      'repo: must be exactly one of { path }, { git, ref? }, { archive } (got "str")',
    );
  });

  it("setup: items by index; job ids that are paths", () => {
    expect(err({ task: "t", repo: R, setup: ["ok", ""] })).toBe('setup[1]: must be a non-empty command (got "")');
    expect(err({ task: "t", repo: R, setup: [3] })).toBe(
      "setup: must be a command or an array of commands (item 0 is 3)",
    );
    expect(err({ task: "t", repo: R, setup: 5 })).toBe("setup: must be a command or an array of commands (got 5)");
    expect(err({ task: "t", repo: R, jobId: "." })).toBe('jobId: must not be "." or ".." (got ".")');
    expect(err({ task: "t", repo: R, jobId: ".." })).toBe('jobId: must not be "." or ".." (got "..")');
    expect(err({ task: "t", repo: R, jobId: "a..b" })).toBe("ok");
  });

  // A spec goes to Redis and into job_started whole: its free texts are capped.
  it("caps the task, each command and the number of setup commands, naming the cap and the size", () => {
    expect(err({ task: "x".repeat(MAX_TASK_CHARS + 1), repo: R })).toBe(
      `task: must be at most ${MAX_TASK_CHARS} characters (got ${MAX_TASK_CHARS + 1})`,
    );
    expect(err({ task: "x".repeat(MAX_TASK_CHARS), repo: R })).toBe("ok");
    const long = "y".repeat(MAX_COMMAND_CHARS + 1);
    expect(err({ task: "t", repo: R, verify: long })).toBe(
      `verify: must be at most ${MAX_COMMAND_CHARS} characters (got ${MAX_COMMAND_CHARS + 1})`,
    );
    expect(err({ task: "t", repo: R, setup: long })).toBe(
      `setup: must be at most ${MAX_COMMAND_CHARS} characters (got ${MAX_COMMAND_CHARS + 1})`,
    );
    expect(err({ task: "t", repo: R, setup: ["a", long] })).toBe(
      `setup[1]: must be at most ${MAX_COMMAND_CHARS} characters (got ${MAX_COMMAND_CHARS + 1})`,
    );
    expect(err({ task: "t", repo: R, setup: Array(65).fill("a") })).toBe("setup: must be at most 64 commands (got 65)");
    expect(err({ task: "t", repo: R, setup: Array(64).fill("a") })).toBe("ok");
  });

  it("JobSpecError is named", () => {
    expect(new JobSpecError("x").name).toBe("JobSpecError");
  });
});

describe("emptyResult", () => {
  it("is a result with no patch, no usage and the given status and error", () => {
    expect(emptyResult("cancelled", "why")).toEqual({
      status: "cancelled",
      patch: "",
      diffstat: "",
      filesChanged: [],
      stopReason: null,
      turns: 0,
      usage: emptyUsage(),
      costUsd: 0,
      timings: { queuedMs: 0, sandboxMs: 0, agentMs: 0, totalMs: 0 },
      error: "why",
    });
    expect(emptyResult("timeout", "t", { jobId: "j", attempt: 2 })).toMatchObject({
      status: "timeout",
      error: "t",
      jobId: "j",
      attempt: 2,
    });
  });
});

describe("limits' bounds, word for word", () => {
  it("names Docker's minimum and the sanity caps with what was given", () => {
    expect(err({ task: "t", repo: R, limits: { memoryMb: 5 } })).toBe(
      "limits.memoryMb: must be at least 6, Docker's minimum (got 5)",
    );
    expect(err({ task: "t", repo: R, limits: { memoryMb: 6 } })).toBe("ok");
    expect(err({ task: "t", repo: R, limits: { memoryMb: 1_048_577 } })).toBe(
      "limits.memoryMb: must be at most 1048576 (got 1048577)",
    );
    expect(err({ task: "t", repo: R, limits: { cpus: 0.001 } })).toBe(
      "limits.cpus: must be at least 0.01, Docker's minimum (got 0.001)",
    );
    expect(err({ task: "t", repo: R, limits: { diskMb: 16_777_217 } })).toBe(
      "limits.diskMb: must be at most 16777216 (got 16777217)",
    );
  });
});

describe("the events a result ends with", () => {
  it("finishedEvent: the result's status, cost and turns; its error only when it has one", () => {
    const r = { ...emptyResult("failed", "it broke"), costUsd: 0.25, turns: 3 };
    expect(finishedEvent(r)).toStrictEqual({
      type: "job_finished",
      status: "failed",
      costUsd: 0.25,
      turns: 3,
      error: "it broke",
    });
    expect(finishedEvent({ status: "completed", costUsd: 0, turns: 1 })).toStrictEqual({
      type: "job_finished",
      status: "completed",
      costUsd: 0,
      turns: 1,
    });
    expect(finishedEvent({ status: "completed", costUsd: 0, turns: 1, error: "" })).not.toHaveProperty("error");
  });

  it("stamped: time, job and attempt before the event's own fields", () => {
    const e = stamped({ type: "job_finished", status: "completed", costUsd: 0, turns: 1 }, "j1", 2);
    expect(e).toMatchObject({ type: "job_finished", jobId: "j1", attempt: 2 });
    expect(Number.isNaN(Date.parse(e.ts))).toBe(false);
  });

  it("filesChangedCount: the total when the list was cut, else the list's length", () => {
    expect(filesChangedCount({ filesChanged: ["a", "b"] })).toBe(2);
    expect(filesChangedCount({ filesChanged: ["a"], filesChangedTotal: 9 })).toBe(9);
    expect(filesChangedCount({ filesChanged: ["a"], filesChangedTotal: 0 })).toBe(0);
  });
});
