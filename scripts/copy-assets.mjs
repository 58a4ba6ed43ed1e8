// Part of `npm run build`: copies the non-TypeScript assets under src/ (Lua, python, bash, the
// browser's JS and CSS; see src/core/assets.ts) to the same paths under dist/.
import { cpSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");
const dist = join(root, "dist");
const ASSET = /\.(lua|py|sh|js|css)$/;
let n = 0;
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (ASSET.test(name)) {
      cpSync(p, join(dist, relative(src, p)));
      n++;
    }
  }
};
walk(src);
console.error(`copy-assets: ${n} files to dist/`);
