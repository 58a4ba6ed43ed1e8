// The one loader of patchbay's non-TypeScript code: Lua for Redis, python and bash run in the
// sandbox, the browser's JS and CSS. Each is a real file under src/ with a header saying what it is
// and what it takes; `npm run build` copies them beside the compiled modules (scripts/copy-assets.mjs),
// so the same relative path works from src/ (tsx, tests) and from dist/ (the package).
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ROOT = new URL("../", import.meta.url);
const cache = new Map<string, string>();
const ASSET = /^[a-z0-9][a-z0-9/_.-]*\.(lua|py|sh|js|css)$/;

/** The text of an asset, by its path under src/ (e.g. "queue/lua/finish-job.lua"); read once. */
export function asset(path: string): string {
  if (!ASSET.test(path) || path.includes("..")) throw new Error(`asset: not an asset path: ${path}`);
  let text = cache.get(path);
  if (text === undefined) cache.set(path, (text = readFileSync(new URL(path, ROOT), "utf8")));
  return text;
}

/**
 * Reads every asset now, into the cache asset() reads from: what a worker does at start, so that a
 * later `npm run build` in the same checkout, rewriting dist/ under the running worker, changes
 * nothing it runs. Returns how many were read.
 */
export function preloadAssets(): number {
  const root = fileURLToPath(ROOT);
  let n = 0;
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = `${entry.parentPath}/${entry.name}`.slice(root.length).replace(/^\/+/, "");
    if (ASSET.test(path) && !path.includes("..") && !cache.has(path)) {
      cache.set(path, readFileSync(new URL(path, ROOT), "utf8"));
      n++;
    }
  }
  return n;
}
