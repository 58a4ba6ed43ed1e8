// The per-repo image with Node and npm that the egress and eval tests run their JavaScript repos in:
// `patchbay image build --from` a context of the host's node, its npm and its CA bundle. The context
// directory is this call's own and its files' mtimes are fixed, so a second build finds the image up to date.
import { copyFileSync, cpSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { ensureBuilt, patchbay } from "./cli-helpers.js";

/** The image's tag. */
export const NODE_IMAGE = "patchbay-test-node:egress";

// This machine's egress gateway re-signs TLS with its own CA, which is in the host's bundle: the
// image brings that bundle, as a per-repo image brings whatever its environment needs.
const DOCKERFILE = `FROM patchbay-sandbox:latest
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY npm.sh /usr/local/bin/npm
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt npm_config_cache=/tmp/npm-cache npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
`;

/**
 * Builds NODE_IMAGE (or finds it up to date) through the CLI and checks what the build reports;
 * returns the tag. It has `node` and `npm` on the PATH, as the sandbox's user.
 */
export async function buildNodeImage(): Promise<string> {
  // A context directory of this call's own (test files that run at once each build, or find the
  // image up to date): its files' mtimes are fixed, and the build's hash reads no directory's path.
  const ctx = mkdtempSync("/var/tmp/patchbay-test-node-image-");
  try {
    return await buildFrom(ctx);
  } finally {
    rmSync(ctx, { recursive: true, force: true });
  }
}

async function buildFrom(ctx: string): Promise<string> {
  const fixed = new Date("2026-01-01T00:00:00Z");
  const put = (name: string, data: string, mode = 0o644) => {
    writeFileSync(join(ctx, name), data, { mode });
    utimesSync(join(ctx, name), fixed, fixed);
  };
  copyFileSync(process.execPath, join(ctx, "node"));
  utimesSync(join(ctx, "node"), fixed, fixed);
  cpSync("/usr/lib/node_modules/npm", join(ctx, "npm"), { recursive: true, preserveTimestamps: true });
  copyFileSync("/etc/ssl/certs/ca-certificates.crt", join(ctx, "ca-certificates.crt"));
  utimesSync(join(ctx, "ca-certificates.crt"), fixed, fixed);
  put("npm.sh", '#!/bin/sh\nexec /usr/local/bin/node /usr/local/lib/node_modules/npm/bin/npm-cli.js "$@"\n', 0o755);
  put("Dockerfile", DOCKERFILE);
  await ensureBuilt();
  const built = await patchbay(
    ["image", "build", "--from", ctx, "--tag", NODE_IMAGE, "--json"],
    {},
    { timeoutMs: 600_000 },
  );
  expect(built.code, built.stderr).toBe(0);
  const r = JSON.parse(built.stdout) as { how: string; ms: number };
  expect(r).toMatchObject({
    tag: NODE_IMAGE,
    bases: ["patchbay-sandbox:latest"],
    check: { uid: "1000", git: true, python3: true },
  });
  console.log(`image build --from: ${r.how} in ${r.ms} ms`);
  return NODE_IMAGE;
}
