// PATCHBAY_API_REPO_ROOTS: the directories under which the HTTP API takes a { path } or { archive }
// repo. The workers read such a repo at that path on their own host, so without roots a write
// token could have them read any directory they can (/root, /etc, /proc/self: their environment)
// and the dashboard tell which paths exist. Checked before anything touches the path, then again
// through its symlinks once resolved.
import { realpathSync } from "node:fs";
import { resolve, sep } from "node:path";

const under = (p: string, root: string) => p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);

/** The real path, or the path as it is when it is not there (the client's own check says so). */
function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/** Why a spec's local repo is refused by the roots ("repo.path: …"), or undefined; no roots: every local repo is. */
export function repoRootProblem(spec: unknown, roots: readonly string[]): string | undefined {
  if (typeof spec !== "object" || spec === null) return undefined;
  const repo = (spec as { repo?: unknown }).repo;
  if (typeof repo !== "object" || repo === null) return undefined;
  for (const field of ["path", "archive"] as const) {
    const given = (repo as Record<string, unknown>)[field];
    if (typeof given !== "string") continue;
    if (!roots.length) return `repo.${field}: the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS, which this dashboard does not set; send { "git": URL }, or set it to the directories scripts may name`;
    const p = resolve(given);
    const ok = roots.some((r) => under(p, r)) && roots.some((r) => under(real(p), real(r)));
    if (!ok) return `repo.${field}: the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS (${roots.join(", ")}); send { "git": URL } for another`;
  }
  return undefined;
}
