// The one error taxonomy (src/core/errors.ts), pure: a root with a kind, the kind of anything thrown, the
// classes' names, and a model error's kind by its status. Which kinds a job owns and what the worker
// does for each kind: test/unit/pure/attempt-outcome.test.ts and test/unit/job-phases.test.ts.
import { describe, expect, it } from "vitest";
import { ModelError } from "../../../src/agent/model.js";
import { UsageError, CliError } from "../../../src/cli/command.js";
import { ERROR_KINDS, JOB_KINDS, kinded, kindOf, PatchbayError, SandboxLostError } from "../../../src/core/errors.js";
import { RepoError } from "../../../src/job/repo/common.js";
import { JobNotFoundError, WaitTimeoutError } from "../../../src/queue/client.js";
import { FileError } from "../../../src/sandbox/files.js";
import { JobSpecError } from "../../../src/core/spec/spec.js";

describe("PatchbayError", () => {
  it("is the root: each class is an Error and a PatchbayError, named as its class, with its kind", () => {
    const cases: [PatchbayError, string, string][] = [
      [new RepoError("x"), "RepoError", "repo"],
      [new JobSpecError("x"), "JobSpecError", "spec"],
      [new SandboxLostError("x"), "SandboxLostError", "sandbox-lost"],
      [new FileError("x", "ENOENT"), "FileError", "tool"],
      [new JobNotFoundError("j", "q"), "JobNotFoundError", "not-found"],
      [new WaitTimeoutError("j", 5), "WaitTimeoutError", "timeout"],
      [new UsageError("x"), "UsageError", "usage"],
      [new CliError("x"), "CliError", "failed"],
      [new CliError("x", "infra"), "CliError", "infra"],
    ];
    for (const [err, name, kind] of cases) {
      expect(err).toBeInstanceOf(Error);
      expect(err).toBeInstanceOf(PatchbayError);
      expect([err.name, err.kind, kindOf(err)]).toEqual([name, kind, kind]);
      expect(String(err)).toBe(`${name}: ${err.message}`);
    }
    expect(new RepoError("x")).not.toBeInstanceOf(JobSpecError);
  });

  it("keeps a cause", () => {
    const cause = new Error("ENOSPC");
    expect(new RepoError("the clone failed", { cause }).cause).toBe(cause);
  });

  it("kinded() makes a class per kind; its subclasses keep their own names", () => {
    class OddError extends kinded("image") {}
    const e = new OddError("no tar");
    expect([e.name, e.kind, e instanceof PatchbayError]).toEqual(["OddError", "image", true]);
  });

  it("a model error is a throttle for 429 and 529, else the model's", () => {
    expect(new ModelError("rate limited", 429, true).kind).toBe("throttle");
    expect(new ModelError("overloaded", 529, true).kind).toBe("throttle");
    expect(new ModelError("bad gateway", 502, true).kind).toBe("model");
    expect(new ModelError("bad request", 400).kind).toBe("model");
  });
});

describe("kindOf", () => {
  it("is a PatchbayError's kind, cancelled for an AbortError, internal for anything else", () => {
    expect(kindOf(new RepoError("x"))).toBe("repo");
    expect(kindOf(AbortSignal.abort().reason)).toBe("cancelled");
    const abort = new Error("aborted");
    abort.name = "AbortError";
    expect(kindOf(abort)).toBe("cancelled");
    for (const other of [new Error("x"), new TypeError("x"), "a string", undefined, { kind: "repo" }])
      expect(kindOf(other)).toBe("internal");
  });

  it("says what each kind means, and the job's own kinds are kinds", () => {
    for (const [k, what] of Object.entries(ERROR_KINDS)) expect(what.length, k).toBeGreaterThan(20);
    for (const k of JOB_KINDS) expect(Object.keys(ERROR_KINDS)).toContain(k);
  });
});
