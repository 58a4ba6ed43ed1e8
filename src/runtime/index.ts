// Which backend runs sandboxes: Docker unless configured otherwise (PATCHBAY_BACKEND). The local
// backend isolates nothing and is for tests and simulations: a worker refuses it unless
// PATCHBAY_TEST_BACKENDS=1 (see src/queue/worker.ts).
import { DockerRuntime } from "./docker.js";
import { LocalRuntime } from "./local.js";
import type { SandboxRuntime } from "./types.js";

export type BackendKind = "docker" | "local";

const made = new Map<BackendKind, SandboxRuntime>();

/** The process's one runtime of this kind. */
export function runtimeOf(kind: BackendKind): SandboxRuntime {
  let r = made.get(kind);
  if (!r) {
    r = kind === "docker" ? new DockerRuntime() : new LocalRuntime();
    made.set(kind, r);
  }
  return r;
}
