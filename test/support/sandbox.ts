// Shared helpers for tests against the real Docker engine. No skipping: a missing engine fails.
import { afterAll, beforeAll } from "vitest";
import { Sandbox, type SandboxOptions } from "../../src/sandbox/sandbox.js";

/** One sandbox for a test file, destroyed afterwards. */
export function useSandbox(opts: SandboxOptions = {}): () => Sandbox {
  let sb: Sandbox | undefined;
  beforeAll(async () => {
    sb = await Sandbox.create({ labels: { "patchbay.test": "1" }, ...opts });
  });
  afterAll(async () => {
    await sb?.destroy();
  });
  return () => {
    if (!sb) throw new Error("sandbox not created (is the Docker engine up? run npm run services)");
    return sb;
  };
}
