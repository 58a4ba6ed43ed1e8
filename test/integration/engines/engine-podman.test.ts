// Only in the engine matrix's Podman half (vitest.config.ts): what a rootless Podman refuses, where
// Docker runs it (test/integration/sandbox-gvisor.test.ts, Docker only).
import { describe, expect, it } from "vitest";
import { EngineConfigError } from "../../../src/backend/engine.js";
import { Sandbox } from "../../../src/sandbox/sandbox.js";

describe("gVisor under Podman", () => {
  it("a sandbox asking for runsc is refused at once, naming why, as the worker's setting (another worker may run its job)", async () => {
    const err = await Sandbox.create({ runtime: "runsc", labels: { "patchbay.test": "1" } }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(EngineConfigError);
    expect(err).toMatchObject({
      kind: "config",
      message: expect.stringMatching(
        /^runtime runsc \(gVisor\) is not available under Podman: run jobs that ask for it on a worker with a Docker engine/,
      ),
    });
  });
});
