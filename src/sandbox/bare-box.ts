// A box made and started on its backend with nothing of patchbay's in it yet: the engine's part of
// a sandbox. Sandbox.create makes one and finishes it (helper, shell, file agent); the warm pool
// makes some ahead, for what a busy worker will need next (verify's sandboxes).
import { randomBytes } from "node:crypto";
import { DEFAULT_IMAGE, defaults, pidsProblem } from "../core/config/config.js";
import { backendOf } from "../backend/index.js";
import { LABEL, processLabel, processOwnerId } from "../backend/owner.js";
import type { Backend, Box, SandboxLimits } from "../backend/types.js";
import type { SandboxOptions } from "./sandbox-options.js";

/** A sandbox's limits: the defaults, with `over` taking precedence. */
export function defaultLimits(over: Partial<SandboxLimits> = {}): SandboxLimits {
  const s = defaults.sandbox;
  return {
    memoryMb: s.memoryMb,
    cpus: s.cpus,
    pids: s.pids,
    diskMb: s.diskMb,
    tmpMb: s.tmpMb,
    network: s.network,
    ...over,
  };
}

/** A box on its backend with nothing of patchbay's in it yet (makeBareBox); remove it with its backend, by name. */
export interface BareBox {
  /** The box's name on its backend (the container's, on Docker). */
  readonly name: string;
  /** The box as the backend made it, with no helper on it yet. */
  readonly made: Box;
  /** What made it, and removes it. */
  readonly backend: Backend;
  /** When the reaper may remove it whatever its owner (epoch seconds). */
  readonly deadline: number;
  /** The limits it was made with (the shell's start needs the pids limit). */
  readonly limits: SandboxLimits;
}

/**
 * A box made and started on the backend with nothing of patchbay's in it yet: the engine's part
 * of a sandbox (~110 of its ~230 core-ms, ~4 of its ~21 MB), which Sandbox.create finishes.
 */
export async function makeBareBox(opts: SandboxOptions = {}): Promise<BareBox> {
  const name = `patchbay-${randomBytes(6).toString("hex")}`;
  const deadline = Math.floor(Date.now() / 1000) + (opts.deadlineSec ?? defaults.sandbox.deadlineSec);
  const labels = {
    // Only an owner that is this process is labelled with it (a given owner id is opaque).
    ...(opts.owner === undefined || opts.owner === processOwnerId ? processLabel() : {}),
    ...opts.labels,
    [LABEL.managed]: "1",
    [LABEL.job]: opts.jobId ?? "",
    [LABEL.worker]: opts.owner ?? processOwnerId,
    [LABEL.deadline]: String(deadline),
  };
  const limits = defaultLimits(opts.limits);
  const runtime = opts.runtime ?? defaults.sandbox.runtime;
  const tooFew = pidsProblem(limits.pids);
  if (tooFew) throw new Error(`Sandbox.create: limits.pids ${limits.pids} ${tooFew}`);
  const backend = opts.backend ?? backendOf("docker");
  const made = await backend.create({
    name,
    image: opts.image ?? DEFAULT_IMAGE,
    limits,
    runtime,
    labels,
    mounts: opts.mounts,
    allowPtrace: opts.allowPtrace === true,
  });
  return { name, made, backend, deadline, limits };
}
