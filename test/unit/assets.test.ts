// The code patchbay keeps in other languages as real files (src/core/assets.ts): every asset under src/
// loads through asset() and is in dist/ after a build; each Lua script's name says how many KEYS
// it takes and its header says what it does, takes and returns; the browser's scripts are plain
// JavaScript with a header; and no TypeScript file under src/ holds Lua, browser code or a bash
// program in a string (the bash files' own checks: shell-scripts.test.ts).
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { Script } from "node:vm";
import { beforeAll, describe, expect, it } from "vitest";
import { asset } from "../../src/core/assets.js";
import { luaScript } from "../../src/core/lua.js";
import { cspHash, escapeHtml } from "../../src/web/escape.js";
import { batchesPage, jobPage, jobsPage, renderTranscriptHtml, STATIC_ASSETS } from "../../src/web/html.js";
import { ensureBuilt, ROOT } from "../support/cli-helpers.js";

const SRC = join(ROOT, "src");
const files = (re: RegExp) =>
  readdirSync(SRC, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && re.test(e.name))
    .map((e) => relative(SRC, join(e.parentPath, e.name)))
    .sort();
const ASSETS = files(/\.(lua|py|sh|js|css)$/);
const LUA = ASSETS.filter((p) => p.endsWith(".lua"));
const WEB = ASSETS.filter((p) => p.startsWith("web/assets/"));
const SH = ASSETS.filter((p) => p.endsWith(".sh"));
const TS = files(/\.ts$/).map((p) => ({ path: p, text: readFileSync(join(SRC, p), "utf8") }));

/** A Lua file's leading comment lines and the code after them (comments dropped). */
function luaParts(text: string): { header: string; code: string } {
  const lines = text.split("\n");
  const n = lines.findIndex((l) => !l.startsWith("--"));
  return {
    header: lines.slice(0, n).join("\n"),
    code: lines
      .slice(n)
      .map((l) => l.replace(/--.*$/, ""))
      .join("\n"),
  };
}
const BASH = /(?<!\\)\\\$\{|\$\{"\$"\}|\bset -[euo]|;[ \t]*(then|do)\b|\besac\b|\|\|\s*exit\s+\d|"\$\{\w+\[@\]\}"/;
/** Shell still in a string, run on the host, not in a sandbox (their files are not this move's): why each is there. */
const BASH_LEFT: Record<string, string> = {
  "git/credentials.ts": "git's credential helper for a host-side clone, a `!` config value git hands to sh",
  "backend/local.ts": "the local backend's pid 1, its bind mounts (tests only)",
};
const indices = (text: string, name: "KEYS" | "ARGV") =>
  [...text.matchAll(new RegExp(`\\b${name}\\[(\\d+)\\]`, "g"))].map((m) => Number(m[1]));
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe("assets", () => {
  it("the assets are where the code loads them from: every asset() and luaCommand() path is a file", () => {
    expect(LUA.length).toBeGreaterThanOrEqual(6);
    expect(WEB).toEqual(
      expect.arrayContaining([
        "web/assets/transcript.js",
        "web/assets/jobs.js",
        "web/assets/job.js",
        "web/assets/batches.js",
        "web/assets/view.js",
        "web/assets/style.css",
      ]),
    );
    const used = TS.flatMap(({ text }) =>
      [...text.matchAll(/\b(?:asset|luaCommand)(?:<[^>]*>)?\("([^"]+)"\)/g)].map((m) => m[1]!),
    );
    expect(used.length).toBeGreaterThanOrEqual(12);
    for (const p of used) expect(ASSETS, `${p} is loaded but is not a file under src/`).toContain(p);
    // Nothing of ours lies unused: each Lua script and browser file is loaded (or included) somewhere.
    const included = LUA.flatMap((p) =>
      [...readFileSync(join(SRC, p), "utf8").matchAll(/^--- @include "([^"]+)"$/gm)].map((m) =>
        join(p, "..", `${m[1]}.lua`),
      ),
    );
    for (const p of [...LUA, ...WEB, ...SH]) expect([...used, ...included], `${p} is never loaded`).toContain(p);
    for (const p of ASSETS) expect(asset(p)).toBe(readFileSync(join(SRC, p), "utf8"));
  });

  describe("dist/", () => {
    beforeAll(() => ensureBuilt(), 240_000);
    it("after a build, dist/ holds every asset, byte for byte", () => {
      for (const p of ASSETS) {
        let built: string | undefined;
        try {
          built = readFileSync(join(ROOT, "dist", p), "utf8");
        } catch {
          built = undefined;
        }
        expect(
          built,
          `dist/${p} is missing or differs from src/${p}: npm run build copies it (scripts/copy-assets.mjs)`,
        ).toBe(readFileSync(join(SRC, p), "utf8"));
      }
    });
  });

  it("each Lua script is named <what>-<KEYS>.lua in a lua/ folder, its number the highest KEYS[i] it reads", () => {
    expect(LUA.length).toBeGreaterThanOrEqual(6);
    for (const p of LUA) {
      const { header, code } = luaParts(readFileSync(join(SRC, p), "utf8"));
      const base = p
        .split("/")
        .pop()!
        .replace(/\.lua$/, "");
      expect(header, `${p}: the header starts "-- ${base}: what it does"`).toMatch(new RegExp(`^-- ${base}: \\S`));
      expect(header, `${p}: the header says its KEYS, its ARGV and what it returns`).toMatch(/^-- KEYS[\s[,]/m);
      expect(header, p).toMatch(/^-- .*\bARGV\b/m);
      expect(header, p).toMatch(/^-- Returns:? /m);
      if (/\/lua\/includes\/[a-z0-9-]+\.lua$/.test(p)) {
        // an include's functions take what they need as arguments
        expect(code, `${p}: an include reads no KEYS or ARGV of its own`).not.toMatch(/\b(KEYS|ARGV)\b/);
        continue;
      }
      const m = /\/lua\/[a-z0-9]+(?:-[a-z0-9]+)*-(\d+|n)\.lua$/.exec(p);
      expect(m, `${p}: not named <what>-<number of KEYS, or n>.lua in a lua/ folder`).not.toBeNull();
      const { lua, numberOfKeys } = luaScript(p);
      const body = lua
        .split("\n")
        .map((l) => l.replace(/--.*$/, ""))
        .join("\n"); // includes in place
      const used = indices(body, "KEYS");
      const every = /#KEYS|ipairs\(KEYS\)/.test(body); // reads every key it is given
      if (m![1] === "n") {
        expect(numberOfKeys, p).toBeUndefined();
        expect(used, `${p}: a script for any number of KEYS names none by index`).toEqual([]);
        expect(every, `${p}: a -n script reads its KEYS by #KEYS or ipairs`).toBe(true);
        expect(header, `${p}: the header says what its KEYS are`).toMatch(/^-- KEYS\s+\S/m);
      } else {
        const n = Number(m![1]);
        expect(numberOfKeys, p).toBe(n);
        // by index up to KEYS[n]; a script that also loops over #KEYS reads KEYS[n] there
        if (every) expect(Math.max(0, ...used), `${p}: the highest KEYS[i] it names`).toBeLessThanOrEqual(n);
        else expect(Math.max(0, ...used), `${p}: the highest KEYS[i] it reads`).toBe(n);
        expect(
          [...new Set(indices(header, "KEYS"))].sort((a, b) => a - b),
          `${p}: the header names KEYS[1] to KEYS[${n}]`,
        ).toEqual(upTo(n));
      }
      const argv = Math.max(0, ...indices(body, "ARGV"));
      expect(
        [...new Set(indices(header, "ARGV"))].sort((a, b) => a - b),
        `${p}: the header names every ARGV[i] it reads`,
      ).toEqual(upTo(argv));
    }
  });

  it("a script's includes are put in place, one level deep", () => {
    const { lua } = luaScript("queue/lua/finish-job-8.lua");
    expect(lua).toContain("local function count(meta, summary, by)");
    expect(lua).not.toMatch(/@include/);
    expect(() => luaScript("queue/lua/finish-job.lua")).toThrow(/<what>-<number of KEYS, or n>\.lua/);
  });

  it("the browser's files are plain JavaScript and CSS, each with its header", () => {
    expect(WEB.length).toBeGreaterThanOrEqual(6);
    for (const p of WEB) {
      const text = readFileSync(join(SRC, p), "utf8");
      const base = p.split("/").pop()!;
      if (p.endsWith(".css")) {
        expect(text, p).toMatch(new RegExp(`^/\\* ${base.replace(".", "\\.")}: \\S[^]*?\\*/\n`));
        expect(text, p).not.toContain("</style");
        continue;
      }
      expect(text, p).toMatch(new RegExp(`^// ${base.replace(".", "\\.")}: \\S`));
      expect(() => new Script(text, { filename: p }), `${p} is not plain JavaScript`).not.toThrow(); // parsed, not run
      expect(text, p).not.toMatch(/<\/script|<!--/i);
    }
  });

  it("the dashboard serves the files, and its pages load only what it serves; the view inlines them under its CSP", () => {
    const served = Object.keys(STATIC_ASSETS).sort();
    expect(served.map((n) => `web/assets/${n}`)).toEqual(WEB.filter((p) => !p.endsWith("/view.js")));
    for (const n of served) expect(STATIC_ASSETS[n]!.body).toBe(asset(`web/assets/${n}`));
    for (const html of [jobsPage(), jobPage(), batchesPage()]) {
      const refs = [...html.matchAll(/(?:src|href)="\/static\/([^"]+)"/g)].map((m) => m[1]!);
      expect(refs.length).toBe(3); // the stylesheet, the renderer, the page's script
      for (const r of refs) expect(served).toContain(r);
    }
    // a name on Object's prototype is no asset (it answered 500, not 404)
    for (const n of ["constructor", "__proto__", "toString", "hasOwnProperty"])
      expect(STATIC_ASSETS[n], n).toBeUndefined();
    const view = renderTranscriptHtml([]);
    const script = `${asset("web/assets/transcript.js")}\n${asset("web/assets/view.js")}`;
    expect(view).toContain(`<script>${script}</script>`);
    expect(view).toContain(`<style>${asset("web/assets/style.css")}</style>`);
    expect(view).toContain(
      escapeHtml(`script-src ${cspHash(script)}; style-src ${cspHash(asset("web/assets/style.css"))};`),
    );
  });

  it("no TypeScript file under src/ holds Lua, browser code or a bash program in a string", () => {
    const code = (text: string) =>
      text
        .split("\n")
        .filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l))
        .join("\n");
    const bad: string[] = [];
    for (const { path, text } of TS) {
      const c = code(text);
      const hit = (what: string, re: RegExp) => re.test(c) && bad.push(`${path}: ${what}`);
      hit("Lua (redis.call)", /redis\.call|redis\.pcall|cjson\.|\bKEYS\[\d/);
      // a <script> element whose body is code, not empty (src=) nor one interpolated asset
      hit("an inline <script>", /<script\b[^>]*>(?!<\/script>|\$\{)/i);
      hit(
        "browser JavaScript",
        /"use strict"|\bdocument\.(getElementById|createElement|body)|\bwindow\.PB|\(function \(\) \{/,
      );
      hit(
        "CSS",
        /(?:^|[\s{;])(?:box-sizing|border-radius|font-family|font-size|white-space|text-align|background-color|grid-template-columns|align-items)\s*:|:root\s*\{|@media\b/m,
      );
      // bash: an escaped ${...} in a template, String.raw's ${"$"}, set -e, if/case/for, || exit N, "${a[@]}"
      if (BASH.test(c) !== path in BASH_LEFT)
        bad.push(`${path}: ${path in BASH_LEFT ? "no bash left: drop it from BASH_LEFT" : "bash"}`);
    }
    expect(bad).toEqual([]);
  });
});
