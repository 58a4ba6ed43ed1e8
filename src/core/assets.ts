// The one loader of patchbay's non-TypeScript code: Lua for Redis, python and bash run in the
// sandbox, the browser's JS and CSS. Each is a real file under src/ with a header saying what it is
// and what it takes; `npm run build` copies them beside the compiled modules (scripts/copy-assets.mjs),
// so the same relative path works from src/ (tsx, tests) and from dist/ (the package).
import { readFileSync } from "node:fs";

const ROOT = new URL("../", import.meta.url);
const cache = new Map<string, string>();

/** The text of an asset, by its path under src/ (e.g. "queue/lua/finish-job.lua"); read once. */
export function asset(path: string): string {
  if (!/^[a-z0-9][a-z0-9/_.-]*\.(lua|py|sh|js|css)$/.test(path) || path.includes(".."))
    throw new Error(`asset: not an asset path: ${path}`);
  let text = cache.get(path);
  if (text === undefined) cache.set(path, (text = readFileSync(new URL(path, ROOT), "utf8")));
  return text;
}
