// Which backend runs sandboxes: Docker unless configured otherwise (PATCHBAY_BACKEND). The local
// backend isolates nothing and is for tests and simulations; the memory backend executes nothing
// and is for simulations (bench/fleet.ts): a worker refuses either unless PATCHBAY_TEST_BACKENDS=1
// (see src/queue/worker.ts).
import { DockerRuntime } from "./docker.js";
import { LocalRuntime } from "./local.js";
import { MemoryRuntime } from "./memory.js";
import type { SandboxRuntime } from "./types.js";
import type { Config } from "../core/config/config.js";
import { kinded } from "../core/errors.js";

export type BackendKind = "docker" | "local" | "memory";

const made = new Map<BackendKind, SandboxRuntime>();

/** The process's one runtime of this kind. */
export function runtimeOf(kind: BackendKind): SandboxRuntime {
  let r = made.get(kind);
  if (!r) {
    r = kind === "docker" ? new DockerRuntime() : kind === "local" ? new LocalRuntime() : new MemoryRuntime();
    made.set(kind, r);
  }
  return r;
}

/** A test backend (local, memory) asked for by the configuration where no test said so. */
export class BackendRefusedError extends kinded("config") {}

/**
 * The configured backend's runtime, for whatever runs a job (a worker, runJob, `run --local`): the
 * local one isolates nothing and the memory one executes nothing, so either only where
 * PATCHBAY_TEST_BACKENDS=1 says tests (or simulations) run.
 */
export function configuredRuntime(config: Pick<Config, "backend" | "testBackends">, who: string): SandboxRuntime {
  if (config.backend !== "docker" && !config.testBackends) {
    throw new BackendRefusedError(`PATCHBAY_BACKEND=${config.backend} runs repos with no isolation: ${who} refuses it (PATCHBAY_TEST_BACKENDS=1 is for tests and simulations only)`);
  }
  return runtimeOf(config.backend);
}
