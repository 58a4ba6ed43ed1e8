// Liveness (src/sandbox/liveness.ts) against a scripted container (through the Docker backend's box): no engine, fast.
import { describe, expect, it } from "vitest";
import { DockerBox } from "../../../src/backend/docker.js";
import { SandboxLostError } from "../../../src/core/errors.js";
import { Liveness } from "../../../src/sandbox/liveness.js";

type State = { Running: boolean; ExitCode?: number };
/** A container whose inspect answers from `next` (a state, an error, or never), counting calls. */
function container(next: () => Promise<{ State: State }>) {
  const c = { calls: 0, inspect: () => (c.calls++, next()) };
  return c;
}
const running = () => Promise.resolve({ State: { Running: true } });
const stopped = (code: number) => () => Promise.resolve({ State: { Running: false, ExitCode: code } });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("Liveness", () => {
  it("passes results and errors through, and inspects nothing while nothing waits", async () => {
    const c = container(running);
    const l = new Liveness(new DockerBox("t", c as never), 20);
    expect(await l.guard(Promise.resolve(7))).toBe(7);
    await expect(l.guard(Promise.reject(new Error("own")))).rejects.toThrow("own");
    await sleep(100);
    expect(c.calls).toBe(0);
    expect(await l.guard(sleep(70).then(() => "slow"))).toBe("slow"); // polled meanwhile, still running
    expect(c.calls).toBeGreaterThanOrEqual(2);
    const after = c.calls;
    await sleep(100);
    expect(c.calls).toBe(after);
  });

  it("a container seen stopped fails what waits within a poll, and every later call at once", async () => {
    let state = running;
    const c = container(() => state());
    const l = new Liveness(new DockerBox("t", c as never), 20);
    const never = new Promise<never>(() => {});
    const waiting = l.guard(never);
    await sleep(50);
    state = stopped(2);
    const t0 = Date.now();
    await expect(waiting).rejects.toThrow(new SandboxLostError("the sandbox's container stopped (exit code 2)"));
    expect(Date.now() - t0).toBeLessThan(500);
    expect(l.gone).toBe("the sandbox's container stopped (exit code 2)");
    const calls = c.calls;
    await expect(l.guard(Promise.resolve(1))).rejects.toBeInstanceOf(SandboxLostError);
    expect(c.calls).toBe(calls); // known already: not asked again
  });

  it("a container that is gone (404) counts as stopped; an engine that fails or does not answer decides nothing", async () => {
    const gone = new Liveness(
      new DockerBox(
        "t",
        container(() => Promise.reject(Object.assign(new Error("no such container"), { statusCode: 404 }))) as never,
      ),
      20,
    );
    await expect(gone.guard(new Promise(() => {}))).rejects.toThrow("exit code unknown");

    let n = 0;
    const flaky = container(() =>
      ++n === 1 ? Promise.reject(Object.assign(new Error("engine restarting"), { statusCode: 500 })) : running(),
    );
    const l = new Liveness(new DockerBox("t", flaky as never), 20);
    expect(await l.guard(sleep(120).then(() => "done"))).toBe("done");
    expect(l.gone).toBeUndefined();

    // An inspect that never answers holds back no caller.
    const stuck = new Liveness(new DockerBox("t", container(() => new Promise(() => {})) as never), 20);
    expect(await stuck.guard(sleep(100).then(() => "fine"))).toBe("fine");
  });

  it("the engine's 409 (not running) for a call is checked at once: a stopped container makes it SandboxLostError with the exit code", async () => {
    const notRunning = () =>
      Object.assign(new Error("(HTTP code 409) container stopped/paused - Container abc is not running"), {
        statusCode: 409,
      });
    const l = new Liveness(new DockerBox("t", container(stopped(2)) as never), 10_000);
    await expect(l.guard(Promise.reject(notRunning()))).rejects.toThrow(
      new SandboxLostError("the sandbox's container stopped (exit code 2)"),
    );
    // Running after all (a race with a restart, say): the engine's own error stands.
    const up = new Liveness(new DockerBox("t", container(running) as never), 10_000);
    await expect(up.guard(Promise.reject(notRunning()))).rejects.toThrow(/HTTP code 409/);
    expect(up.gone).toBeUndefined();
  });

  it("lost() fails pending and later calls with its reason", async () => {
    const l = new Liveness(new DockerBox("t", container(running) as never), 10_000);
    const waiting = l.guard(new Promise(() => {}));
    l.lost("the engine said so");
    await expect(waiting).rejects.toThrow("the engine said so");
    await expect(l.guard(Promise.resolve(0))).rejects.toThrow("the engine said so");
  });
});
