// The per-repo image with Node the MCP tests run their server in: `patchbay image build --from` a
// context of the host's node and test/fixtures/mcp-server.mjs bundled with its SDK into one file.
// The context has fixed mtimes, so a second build finds the image up to date.
import { copyFileSync, mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { expect } from "vitest";
import { ensureBuilt, patchbay } from "./cli-helpers.js";

export const MCP_IMAGE = "patchbay-test-node:mcp";
const DOCKERFILE = `FROM patchbay-sandbox:latest
COPY node /usr/local/bin/node
COPY mcp-server.mjs /opt/mcp/server.mjs
`;

/** Builds (or finds up to date) the image; the server runs as `node /opt/mcp/server.mjs`. */
export async function buildMcpImage(): Promise<string> {
  const ctx = "/var/tmp/patchbay-test-mcp-image";
  mkdirSync(ctx, { recursive: true });
  const fixed = new Date("2026-01-01T00:00:00Z");
  copyFileSync(process.execPath, join(ctx, "node"));
  await build({
    entryPoints: ["test/fixtures/mcp-server.mjs"],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: join(ctx, "mcp-server.mjs"),
    logLevel: "error",
  });
  writeFileSync(join(ctx, "Dockerfile"), DOCKERFILE);
  for (const f of ["node", "mcp-server.mjs", "Dockerfile"]) utimesSync(join(ctx, f), fixed, fixed);
  await ensureBuilt();
  const built = await patchbay(
    ["image", "build", "--from", ctx, "--tag", MCP_IMAGE, "--json"],
    {},
    { timeoutMs: 600_000 },
  );
  expect(built.code, built.stderr).toBe(0);
  return MCP_IMAGE;
}
