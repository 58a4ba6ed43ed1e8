#!/usr/bin/env node
// The `patchbay` command: the compiled CLI, dist/cli.js (`npm run build`; `prepare` builds it on
// `npm ci` and on git installs). In a git checkout where src/ is newer than dist/ (or dist/ is not
// built yet), it runs src/ through tsx, a devDependency, so in-repo scripts and tests never run
// stale code. An installed package has no src/, so this check costs one failed stat.
import { existsSync, readdirSync, statSync } from "node:fs";

const root = new URL("../", import.meta.url);
const dist = new URL("dist/cli.js", root);
const src = new URL("src/", root);

function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && e.name.endsWith(".ts"))
      newest = Math.max(newest, statSync(`${e.parentPath ?? e.path}/${e.name}`).mtimeMs);
  }
  return newest;
}

async function fromSource() {
  let tsx;
  try {
    tsx = await import("tsx/esm/api");
  } catch {
    return false; // no devDependencies: use dist/ as it is
  }
  tsx.register();
  await import(new URL("src/cli.ts", root).href);
  return true;
}

const stale = existsSync(src) && (!existsSync(dist) || newestMtime(src) > statSync(dist).mtimeMs);
if (!(stale && (await fromSource()))) {
  if (!existsSync(dist)) {
    process.stderr.write("patchbay: dist/ is missing; run `npm run build` first\n");
    process.exit(1);
  }
  await import(dist.href);
}
