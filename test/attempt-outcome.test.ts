// How the worker classifies a failed attempt (src/queue/attempt-outcome.ts), pure (and the health
// gate's check of the worker's own Redis connections, src/queue/health.ts): the table's rows
// in order, and which of the two costly questions (a fresh health check; counting an infrastructure
// failure on the job) each kind of error asks. The worker tests (worker-health, resume-e2e,
// e2e-reliability) show the same outcomes through real workers.
import { UnrecoverableError } from "bullmq";
import { describe, expect, it } from "vitest";
import { ModelError } from "../src/agent/model.js";
import { ERROR_KINDS, JOB_KINDS, SandboxLostError } from "../src/errors.js";
import { GitStepError } from "../src/job/git-store.js";
import { RepoError } from "../src/job/repo-common.js";
import { PatchError } from "../src/job/rounds.js";
import { SetupError } from "../src/job/setup.js";
import { VerifyError } from "../src/job/verify.js";
import { EgressDirError } from "../src/net/private-dir.js";
import { classifyFailure, ON_FAILURE, REDIS_HAND_BACKS, type FailureFacts } from "../src/queue/attempt-outcome.js";
import { checkConnections } from "../src/queue/health.js";
import { isRedisConnectionError } from "../src/redis-errors.js";
import { BatchFileError } from "../src/queue/batch-file.js";
import { JobSpecError } from "../src/spec.js";

/** Facts with a recorder of the questions asked. */
function facts(err: unknown, o: { abandoned?: boolean; used?: number; attempts?: number; healthy?: boolean; infraBefore?: number } = {}) {
  const asked: string[] = [];
  const f: FailureFacts = {
    err,
    abandoned: o.abandoned ?? false,
    used: o.used ?? 0,
    attempts: o.attempts ?? 3,
    engineHealthy: async () => (asked.push("health"), o.healthy ?? true),
    countInfraFailure: async () => (asked.push("count"), o.infraBefore ?? 0),
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
    for (const err of [new RepoError("too large"), new SetupError("npm ci failed"), new PatchError("no patch"), new VerifyError("no tree"), new JobSpecError("bad"), new BatchFileError(["l:1: bad"])]) {
      const { f, asked } = facts(err, { used: 0, attempts: 5, healthy: false });
      expect(await classifyFailure(f)).toEqual({ action: "fail", engineFailed: false });
      expect(asked).toEqual([]);
    }
  });

  it("a lost sandbox, a step in a dead sandbox and the worker's own settings retry, and may hand back on an unhealthy engine", async () => {
    for (const err of [new SandboxLostError("the container stopped"), new GitStepError("git failed"), new EgressDirError("bad dir")]) {
      expect(await classifyFailure(facts(err, { used: 0, attempts: 3 }).f)).toEqual({ action: "retry", engineFailed: false });
      expect(await classifyFailure(facts(err, { used: 0, attempts: 3, healthy: false, infraBefore: 1 }).f)).toEqual({ action: "hand-back", engineFailed: false });
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
    const maxRetries = new Error("Reached the max retries per request limit (which is 20). Refer to \"maxRetriesPerRequest\" option for details.");
    maxRetries.name = "MaxRetriesPerRequestError";
    return [new Error("Connection is closed."), maxRetries, new Error("Command aborted due to connection close"), new Error("READONLY You can't write against a read only replica."), new Error("LOADING Redis is loading the dataset in memory"), new Error("CLUSTERDOWN The cluster is down")];
  };

  it("hands the job back uncounted, even on its last attempt, up to REDIS_HAND_BACKS times; then it counts", async () => {
    for (const err of redisErrors()) {
      const { f, asked } = facts(err, { used: 2, attempts: 3, infraBefore: REDIS_HAND_BACKS - 1 });
      expect(await classifyFailure(f), err.message).toEqual({ action: "hand-back", engineFailed: false });
      expect(asked).toEqual(["count"]);
      const spent = facts(err, { used: 1, attempts: 3, infraBefore: REDIS_HAND_BACKS });
      expect(await classifyFailure(spent.f), err.message).toEqual({ action: "retry", engineFailed: false });
      const last = facts(err, { used: 2, attempts: 3, infraBefore: REDIS_HAND_BACKS });
      expect(await classifyFailure(last.f), err.message).toEqual({ action: "fail", engineFailed: false });
    }
  });

  it("tells the connection's errors from a command's and from the engine's socket", () => {
    for (const err of redisErrors()) expect(isRedisConnectionError(err), err.message).toBe(true);
    const engine = Object.assign(new Error("connect ECONNREFUSED /var/run/docker.sock"), { code: "ECONNREFUSED" });
    for (const err of [engine, new Error("WRONGTYPE Operation against a key holding the wrong kind of value"), new Error("ERR unknown command 'FOO'"), new Error("socket hang up"), new Error("the connection is closed by the repo"), "Connection is closed.", undefined]) {
      expect(isRedisConnectionError(err), String(err)).toBe(false);
    }
  });
});

describe("checkConnections", () => {
  const conn = (status: string) => {
    const c = { status, connects: 0, connect: async () => void c.connects++ };
    return c;
  };

  it("a connection that ended is connected again and keeps the worker from taking jobs; one reconnecting is healthy", () => {
    const ended = conn("end");
    const reconnecting = conn("reconnecting");
    const ready = conn("ready");
    expect(checkConnections({ commands: ready, cancels: reconnecting })).toEqual({ ok: true });
    expect(checkConnections({ commands: ready, cancels: reconnecting, queue: ended })).toEqual({ ok: false, reason: "its Redis connection (queue) had ended; connecting again" });
    expect([ended.connects, reconnecting.connects, ready.connects]).toEqual([1, 0, 0]);
    expect(checkConnections({ commands: conn("end"), queue: conn("end") })).toEqual({ ok: false, reason: "its Redis connections (commands, queue) had ended; connecting again" });
  });

  it("a connect that fails is left to the next check", async () => {
    const c = { status: "end", connect: () => Promise.reject(new Error("ECONNREFUSED")) };
    expect(checkConnections({ commands: c }).ok).toBe(false);
    await new Promise((r) => setTimeout(r, 10)); // no unhandled rejection
  });
});
