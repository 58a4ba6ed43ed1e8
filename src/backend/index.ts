// Which backend runs sandboxes: Docker unless configured otherwise (PATCHBAY_BACKEND). The local
// backend isolates nothing and is for tests and simulations; the memory backend executes nothing
// and is for simulations (bench/fleet.ts): a worker refuses either unless PATCHBAY_TEST_BACKENDS=1
// (see src/queue/worker.ts).
import { DockerBackend } from "./docker.js";
import { LocalBackend } from "./local.js";
import { MemoryBackend } from "./memory.js";
import type { Backend, BackendKind } from "./types.js";
import type { Config } from "../core/config/config.js";
import { kinded } from "../core/errors.js";

export type { BackendKind };

const made = new Map<BackendKind, Backend>();

/** The process's one backend of this kind, made on first use. */
export function backendOf(kind: BackendKind): Backend {
  let r = made.get(kind);
  if (!r) {
    r = kind === "docker" ? new DockerBackend() : kind === "local" ? new LocalBackend() : new MemoryBackend();
    made.set(kind, r);
  }
  return r;
}

/** A test backend (local, memory) asked for by the configuration where no test said so. */
export class BackendRefusedError extends kinded("config") {}

/**
 * The configured backend (PATCHBAY_BACKEND), for whatever runs a job (a worker, runJob, `run --local`): the
 * local one isolates nothing and the memory one executes nothing, so either only where
 * PATCHBAY_TEST_BACKENDS=1 says tests (or simulations) run.
 */
export function configuredBackend(config: Pick<Config, "backend" | "testBackends">, who: string): Backend {
  if (config.backend !== "docker" && !config.testBackends) {
    throw new BackendRefusedError(
      `PATCHBAY_BACKEND=${config.backend} runs repos with no isolation: ${who} refuses it (PATCHBAY_TEST_BACKENDS=1 is for tests and simulations only)`,
    );
  }
  return backendOf(config.backend);
}
