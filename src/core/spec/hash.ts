// A JobSpec's identity, one way for every part (enqueue's job-id check, batch hashes, checkpoints): its
// canonical JSON, keys sorted at every depth, so a spec hashes the same whatever order its keys were
// written, parsed or stored in. Pure.
import { createHash } from "node:crypto";

/** JSON with every object's keys sorted: equal for two values that differ only in key order. */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );
}

/** A spec's identity: the first 128 bits of the SHA-256 of its canonical JSON, in hex. */
export const specHash = (spec: unknown): string =>
  createHash("sha256").update(canonicalJson(spec)).digest("hex").slice(0, 32);
