// README.md's "A 30-second tour", run as written after the demo: the tour's commands are read from
// README.md itself (each code block marked `<!-- example: test/e2e/readme-tour.test.ts -->`), and
// run in order in one bash, from a directory with the clone's examples/, against a Redis of this
// test's own on the default queue, with no ANTHROPIC_API_KEY. First the demo's job
// (scripts/demo.mjs: its scripted worker, then stopped), then each `$ ` line, substituting only
// `patchbay` → `node bin/patchbay.js` and the dashboard's port (a free one for 7474). Each command
// must exit 0, and its output must show the README's lines in order (a batch's progress lines in
// any), up to the numbers, times and ids (a `…` line stands for lines left out). What the tour
// makes is checked too: the patches, the batch's report, the scripted labels. The worker command
// of docs/operations.md's "Trying patchbay without a key" is the tour's.
//
// Needs: Docker with the sandbox image, redis-server, python3, curl.
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, ensureBuilt, ROOT } from "../support/cli-helpers.js";
import { freePort, startRedis } from "../support/cluster.js";

const MARK = "<!-- example: test/e2e/readme-tour.test.ts -->";

/** One `$ ` command of the tour and the output lines the README shows for it. */
interface Step {
  command: string;
  shown: string[];
}

/** The tour's marked code blocks in README.md, as steps. */
function tourSteps(readme: string): Step[] {
  const from = readme.indexOf("## A 30-second tour");
  const section = readme.slice(from, readme.indexOf("\n## ", from + 1));
  const steps: Step[] = [];
  for (const m of section.matchAll(/^<!-- example: test\/e2e\/readme-tour\.test\.ts -->\n```[a-z]*\n([\s\S]*?)```/gm)) {
    const lines = m[1]!.split("\n").filter((l) => l !== "");
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (line.startsWith("$ ")) {
        let command = line.slice(2);
        while (command.endsWith("\\") && i + 1 < lines.length)
          command = `${command.slice(0, -1)} ${lines[++i]!.trim()}`;
        steps.push({ command, shown: [] });
      } else steps.at(-1)!.shown.push(line);
    }
  }
  return steps;
}

/** A shown line as a pattern: numbers (1.2k), durations (1m12s), hex ids and times may differ, `…` stands for any text. */
function shape(line: string): RegExp {
  const parts = line.split(/(…|[0-9a-f]{12,}|\d+(?:[hm]\d+)*m?s\b|\d+(?:\.\d+)?k?)/).map((p, i) => {
    if (i % 2 === 0) return p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/\s+/g, "\\s+");
    if (p === "…") return ".*";
    if (/^[0-9a-f]{12,}$/.test(p)) return "[0-9a-f]+";
    return /s$/.test(p) ? "\\d+(?:[hm]\\d+)*m?s" : "\\d+(?:\\.\\d+)?k?";
  });
  return new RegExp(`^\\s*${parts.join("")}`);
}

/**
 * The first shown line the output does not have, or undefined: each shown line must match a line of
 * its own. In order, except that lines of one shape may come in any order among themselves (a
 * batch's jobs finish in any order).
 */
function missing(output: string, shown: string[]): string | undefined {
  const lines = output.split("\n");
  const used = new Set<number>();
  let at = 0;
  for (const s of shown) {
    if (s === "…") continue;
    const re = shape(s);
    const found = lines.findIndex((l, i) => i >= at && !used.has(i) && re.test(l));
    const anyOrder = found < 0 ? lines.findIndex((l, i) => !used.has(i) && re.test(l)) : found;
    if (anyOrder < 0) return s;
    used.add(anyOrder);
    if (found >= 0) at = found + 1;
  }
  return undefined;
}

const sh = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

describe("README.md's tour, as written, after the demo (scripted model, no key)", { timeout: 600_000 }, () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dir: string;
  let port: number;
  const steps = tourSteps(readFileSync(join(ROOT, "README.md"), "utf8"));
  const env: Record<string, string> = {};

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    port = await freePort();
    dir = mkdtempSync(join(tmpdir(), "pb-tour-"));
    cpSync(join(ROOT, "examples"), join(dir, "examples"), { recursive: true });
    for (const [k, v] of Object.entries(process.env))
      if (v !== undefined && !/^(ANTHROPIC_|PATCHBAY_)/.test(k)) env[k] = v;
    env.REDIS_URL = redis.url;
  });

  afterAll(async () => {
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reads the tour's commands from README.md: every block marked, each command with its output", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## A 30-second tour"), readme.indexOf("\n## CLI"));
    const blocks = section.match(/^```/gm)!.length / 2;
    expect(section.split(MARK).length - 1).toBe(blocks); // no block of the tour is left unrun
    expect(steps.map((s) => s.command.split(" ").slice(0, 3).join(" "))).toContain("patchbay worker --scripted");
    expect(steps.length).toBeGreaterThanOrEqual(12);
    // docs/operations.md's "Trying patchbay without a key" opens with the same worker command.
    const ops = readFileSync(join(ROOT, "docs/operations.md"), "utf8");
    expect(ops).toContain("patchbay worker --scripted examples/scripted/clamp.yaml");
  });

  it("runs every command as written; each exits 0 with the output the README shows", async () => {
    // The demo's job first: `npm run demo` past its installs (scripts/demo.sh's last line).
    const demo = await run(`${sh(process.execPath)} scripts/demo.mjs`, ROOT, env);
    expect(demo.code, demo.output).toBe(0);
    expect(demo.output).toContain("the model is SCRIPTED");

    const script = [`cd ${sh(dir)}`, "T=$(mktemp -d)"];
    steps.forEach((s, i) => {
      const command = s.command
        .replace(/(^|[\s($|;&])patchbay(?= )/g, `$1${sh(process.execPath)} ${sh(BIN)}`)
        .replace(/ dashboard(?= )/, ` dashboard --port ${port}`)
        .replace(/7474/g, String(port));
      if (command.trimEnd().endsWith("&")) {
        script.push(command, `echo $! >> "$T/pids"`, `echo 0 > "$T/rc.${i}"; : > "$T/out.${i}"`);
        // A server started in the background is ready before the next command, as a reader waits.
        if (/ dashboard /.test(command))
          script.push(
            `for _ in $(seq 1 300); do curl -s -o /dev/null http://127.0.0.1:${port}/ && break; sleep 0.2; done`,
          );
      } else script.push(`{ ${command}\n} > "$T/out.${i}" 2>&1; echo $? > "$T/rc.${i}"`);
    });
    script.push(`kill $(cat "$T/pids") 2>/dev/null; wait; echo "$T"`);
    writeFileSync(join(dir, "tour.sh"), script.join("\n") + "\n");
    const tour = await run(`bash ${sh(join(dir, "tour.sh"))}`, dir, env);
    const t = tour.output.trim().split("\n").at(-1)!;
    steps.forEach((s, i) => {
      const output = existsSync(join(t, `out.${i}`)) ? readFileSync(join(t, `out.${i}`), "utf8") : "(no output file)";
      const rc = existsSync(join(t, `rc.${i}`)) ? readFileSync(join(t, `rc.${i}`), "utf8").trim() : "(not run)";
      expect({ command: s.command, rc }, output).toEqual({ command: s.command, rc: "0" });
      expect(missing(output, s.shown), `${s.command}\n--- output ---\n${output}`).toBeUndefined();
    });
    rmSync(t, { recursive: true, force: true });

    // What the tour made: the fix from `run` and from the HTTP API, the batch's report, all scripted.
    expect(readFileSync(join(dir, "out/patch.diff"), "utf8")).toContain("+        return hi");
    expect(readFileSync(join(dir, "fix.diff"), "utf8")).toContain("+        return hi");
    const result = JSON.parse(readFileSync(join(dir, "out/result.json"), "utf8"));
    expect(result).toMatchObject({ scripted: true, costUsd: 0, model: "scripted:clamp.yaml" });
    expect(result.priceUnknown).toBeUndefined();
    expect(readFileSync(join(dir, "out-batch/summary.md"), "utf8")).toContain("clamp-x3");
    expect(readFileSync(join(dir, "worker.log"), "utf8")).toContain("model scripted:clamp.yaml, SCRIPTED");
  });
});

/** Runs a shell command line; resolves to its exit code and its stdout and stderr together. */
function run(line: string, cwd: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const p = spawn("bash", ["-c", line], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    p.stdout.on("data", (d) => (output += d));
    p.stderr.on("data", (d) => (output += d));
    p.on("exit", (code) => resolve({ code, output }));
  });
}
