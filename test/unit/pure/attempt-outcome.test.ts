// How the worker classifies a failed attempt (src/queue/attempt-outcome.ts), pure: the table's rows
// in order, and which of the two costly questions (a fresh health check; counting an infrastructure
// failure on the job) each kind of error asks. The worker tests (worker-health, resume-e2e,
// e2e-reliability) show the same outcomes through real workers.
import { UnrecoverableError } from "bullmq";
import { describe, expect, it } from "vitest";
import { ModelError } from "../../../src/agent/model.js";
import { ERROR_KINDS, JOB_KINDS, SandboxLostError } from "../../../src/core/errors.js";
import { GitStepError } from "../../../src/job/git-store.js";
import { RepoError } from "../../../src/job/repo/common.js";
import { PatchError } from "../../../src/job/rounds.js";
import { SetupError } from "../../../src/job/setup.js";
import { VerifyError } from "../../../src/job/verify.js";
import { EgressDirError } from "../../../src/net/private-dir.js";
import {
  classifyFailure,
  ON_FAILURE,
  REDIS_HAND_BACKS,
  type FailureFacts,
} from "../../../src/queue/attempt-outcome.js";
import { isRedisConnectionError } from "../../../src/redis/connection-errors.js";
import { BatchFileError } from "../../../src/batch/batch-file.js";
import { JobSpecError } from "../../../src/core/spec/spec.js";

/** Facts with a recorder of the questions asked. */
function facts(
  err: unknown,
  o: {
    abandoned?: boolean;
    used?: number;
    attempts?: number;
    healthy?: boolean;
    infraBefore?: number;
    redisBefore?: number;
  } = {},
) {
  const asked: string[] = [];
  const f: FailureFacts = {
    err,
    abandoned: o.abandoned ?? false,
    used: o.used ?? 0,
    attempts: o.attempts ?? 3,
    engineHealthy: async () => (asked.push("health"), o.healthy ?? true),
    countInfraFailure: async () => (asked.push("count"), o.infraBefore ?? 0),
    countRedisHandBack: async () => (asked.push("redis"), o.redisBefore ?? 0),
  };
  return { f, asked };
}

describe("classifyFailure", () => {
  it("an abandoned job goes back, whatever the error, asking nothing", async () => {
    for (const err of [new Error("x"), new ModelError("rate limited", 429, true), new UnrecoverableError("never")]) {
      const { f, asked } = facts(err, { abandoned: true, healthy: false, infraBefore: 5 });
      expect(await classifyFailure(f)).toEqual({ action: "abandon", engineFailed: false });
      expect(asked).toEqual([]);
    }
  });

  it("a 429 or 529 throttles the queue, even on the last attempt, asking nothing", async () => {
    for (const status of [429, 529]) {
      const { f, asked } = facts(new ModelError("busy", status, true), { used: 2, attempts: 3, healthy: false });
      expect(await classifyFailure(f)).toEqual({ action: "throttle", engineFailed: false });
      expect(asked).toEqual([]);
    }
  });

  it("another model error retries while attempts are left, then fails, and never asks the engine", async () => {
    const retry = facts(new ModelError("bad gateway", 502, true), { used: 1, attempts: 3, healthy: false });
    expect(await classifyFailure(retry.f)).toEqual({ action: "retry", engineFailed: false });
    const last = facts(new ModelError("bad gateway", 502, true), { used: 2, attempts: 3, healthy: false });
    expect(await classifyFailure(last.f)).toEqual({ action: "fail", engineFailed: false });
    expect([...retry.asked, ...last.asked]).toEqual([]);
  });

  it("an UnrecoverableError fails at once with attempts left, and never asks the engine", async () => {
    const { f, asked } = facts(new UnrecoverableError("a bad spec"), { used: 0, attempts: 5, healthy: false });
    expect(await classifyFailure(f)).toEqual({ action: "fail", engineFailed: false });
    expect(asked).toEqual([]);
  });

  it("another error on a healthy engine retries while attempts are left (stalls count), then fails; no infra failure is counted", async () => {
    const retry = facts(new Error("tar failed"), { used: 1, attempts: 3 });
    expect(await classifyFailure(retry.f)).toEqual({ action: "retry", engineFailed: false });
    expect(retry.asked).toEqual(["health"]);
    const last = facts(new Error("tar failed"), { used: 2, attempts: 3 });
    expect(await classifyFailure(last.f)).toEqual({ action: "fail", engineFailed: false });
    expect(last.asked).toEqual(["health"]);
  });

  it("the engine failing under a job counts the first time (retry or fail, saying so) and hands back after", async () => {
    const first = facts(new Error("socket hang up"), { used: 0, attempts: 3, healthy: false, infraBefore: 0 });
    expect(await classifyFailure(first.f)).toEqual({ action: "retry", engineFailed: true });
    expect(first.asked).toEqual(["health", "count"]);
    const firstLast = facts(new Error("socket hang up"), { used: 0, attempts: 1, healthy: false, infraBefore: 0 });
    expect(await classifyFailure(firstLast.f)).toEqual({ action: "fail", engineFailed: true });
    const again = facts(new Error("socket hang up"), { used: 2, attempts: 3, healthy: false, infraBefore: 1 });
    expect(await classifyFailure(again.f)).toEqual({ action: "hand-back", engineFailed: false });
    expect(again.asked).toEqual(["health", "count"]);
  });

  it("a thrown non-Error is judged like an error of the engine's side", async () => {
    const { f } = facts("a string", { used: 0, attempts: 2, healthy: true });
    expect(await classifyFailure(f)).toEqual({ action: "retry", engineFailed: false });
  });
});

describe("the kinds' table (ON_FAILURE)", () => {
  it("a job's own kinds, a bad spec and the like fail at once with attempts left, asking nothing", async () => {
    for (const err of [
      new RepoError("too large"),
      new SetupError("npm ci failed"),
      new PatchError("no patch"),
      new VerifyError("no tree"),
      new JobSpecError("bad"),
      new BatchFileError(["l:1: bad"]),
    ]) {
      const { f, asked } = facts(err, { used: 0, attempts: 5, healthy: false });
      expect(await classifyFailure(f)).toEqual({ action: "fail", engineFailed: false });
      expect(asked).toEqual([]);
    }
  });

  it("a lost sandbox, a step in a dead sandbox and the worker's own settings retry, and may hand back on an unhealthy engine", async () => {
    for (const err of [
      new SandboxLostError("the container stopped"),
      new GitStepError("git failed"),
      new EgressDirError("bad dir"),
    ]) {
      expect(await classifyFailure(facts(err, { used: 0, attempts: 3 }).f)).toEqual({
        action: "retry",
        engineFailed: false,
      });
      expect(await classifyFailure(facts(err, { used: 0, attempts: 3, healthy: false, infraBefore: 1 }).f)).toEqual({
        action: "hand-back",
        engineFailed: false,
      });
    }
  });

  it("gives every kind an action, the job's own kinds all fail, and the model's never ask the engine", () => {
    expect(Object.keys(ON_FAILURE).sort()).toEqual(Object.keys(ERROR_KINDS).sort());
    for (const k of JOB_KINDS) expect(ON_FAILURE[k]).toBe("fail");
    expect(ON_FAILURE.throttle).toBe("throttle");
    expect(ON_FAILURE.model).toBe("retry");
    expect(ON_FAILURE.internal).toBe("engine"); // an error nobody classified is treated as the host's, as before the taxonomy
  });
});

describe("the worker's Redis connection failing under a job", () => {
  const redisErrors = () => {
    const maxRetries = new Error(
      'Reached the max retries per request limit (which is 20). Refer to "maxRetriesPerRequest" option for details.',
    );
    maxRetries.name = "MaxRetriesPerRequestError";
    return [
      new Error("Connection is closed."),
      maxRetries,
      new Error("Command aborted due to connection close"),
      reply("READONLY You can't write against a read only replica."),
      reply("LOADING Redis is loading the dataset in memory"),
      reply("CLUSTERDOWN The cluster is down"),
    ];
  };
  /** A reply error as ioredis gives it (redis-errors' ReplyError: its name says so). */
  function reply(message: string): Error {
    const e = new Error(message);
    e.name = "ReplyError";
    return e;
  }

  it("hands the job back uncounted, even on its last attempt, up to REDIS_HAND_BACKS times (its own count); then it counts, never as the engine's", async () => {
    for (const err of redisErrors()) {
      const { f, asked } = facts(err, {
        used: 2,
        attempts: 3,
        redisBefore: REDIS_HAND_BACKS - 1,
        infraBefore: 5,
        healthy: false,
      });
      expect(await classifyFailure(f), err.message).toEqual({ action: "hand-back", engineFailed: false });
      expect(asked).toEqual(["redis"]);
      // Spent (or not countable: Infinity): retry or fail as any failure, and an unhealthy check meanwhile is not "the engine failed".
      for (const redisBefore of [REDIS_HAND_BACKS, Infinity]) {
        const spent = facts(err, { used: 1, attempts: 3, redisBefore, infraBefore: 1, healthy: false });
        expect(await classifyFailure(spent.f), err.message).toEqual({ action: "retry", engineFailed: false });
        expect(spent.asked).toEqual(["redis"]);
        const last = facts(err, { used: 2, attempts: 3, redisBefore, healthy: false });
        expect(await classifyFailure(last.f), err.message).toEqual({ action: "fail", engineFailed: false });
      }
    }
  });

  it("the engine's hand-backs are counted apart: Redis hand-backs before do not skip the engine's first counted failure", async () => {
    const { f, asked } = facts(new Error("socket hang up"), {
      used: 0,
      attempts: 3,
      healthy: false,
      infraBefore: 0,
      redisBefore: 2,
    });
    expect(await classifyFailure(f)).toEqual({ action: "retry", engineFailed: true });
    expect(asked).toEqual(["health", "count"]);
  });

  it("tells the connection's errors from a command's, the engine's socket and patchbay's own (which may carry a sandbox's text)", () => {
    for (const err of redisErrors()) expect(isRedisConnectionError(err), err.message).toBe(true);
    // A MULTI on a demoted master: EXECABORT, READONLY among its previous errors; the result record's refusal, by its cause.
    const readonly = reply("READONLY You can't write against a read only replica.");
    expect(
      isRedisConnectionError(
        Object.assign(reply("EXECABORT Transaction discarded because of previous errors."), {
          previousErrors: [readonly],
        }),
      ),
    ).toBe(true);
    expect(
      isRedisConnectionError(new Error("Redis refused to store the job's result: READONLY …", { cause: readonly })),
    ).toBe(true);
    for (const m of [
      "Too many Cluster redirections. Last error: Error: CLUSTERDOWN",
      "Cluster is disconnected.",
      "Connection is aborted",
    ])
      expect(isRedisConnectionError(new Error(m)), m).toBe(true);
    const engine = Object.assign(new Error("connect ECONNREFUSED /var/run/docker.sock"), { code: "ECONNREFUSED" });
    const own = [new SandboxLostError("Connection is closed."), new GitStepError("READONLY file system")];
    const notReply = new Error("READONLY You can't write against a read only replica."); // a plain Error: text, not Redis's reply
    for (const err of [
      engine,
      ...own,
      notReply,
      reply("WRONGTYPE Operation against a key holding the wrong kind of value"),
      reply("ERR unknown command 'FOO'"),
      new Error("socket hang up"),
      new Error("the connection is closed by the repo"),
      "Connection is closed.",
      undefined,
    ]) {
      expect(isRedisConnectionError(err), String(err)).toBe(false);
    }
  });
});
