// Every root process in a sandbox runs with a fixed, trusted environment (src/sandbox/py/trusted.py):
// an image made by `patchbay image build --from` whose ENV points PATH, LD_PRELOAD, PYTHONPATH,
// PYTHONSTARTUP, BASH_ENV, ENV, GIT_* and HOME into /workspace and /tmp, where the agent plants
// wrappers (test/fixtures/root-env/plant.sh) that each append "<what> <uid>" to /tmp/marks/log. A
// whole job (setup, the agent, verify, the patch) and every root process of a sandbox's own
// (the file agent's git, a root exec, the snapshot's tar, the egress bridge): no mark says uid 0,
// while the agent's own processes do run the wrappers (marks of uid 1000).
//
// Backend: Docker (the image's `ENV` and the exec's environment are the engine's).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildImageFrom } from "../../src/sandbox/image-from.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { reply, text, toolResultText, toolResults, toolUse } from "../support/fake-anthropic.js";
import { closeScripted, runScripted } from "../support/scripted-job.js";

const TAG = "patchbay-test-rootenv:latest";
const PLANT = readFileSync(new URL("../fixtures/root-env/plant.sh", import.meta.url), "utf8");
const DOCKERFILE = `FROM patchbay-sandbox:latest
COPY evil.so /opt/evil/evil.so
ENV PATH=/workspace/.venv/bin:/tmp/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    LD_PRELOAD=/workspace/.venv/evil.so PYTHONPATH=/tmp/py PYTHONSTARTUP=/tmp/py/startup.py \\
    BASH_ENV=/workspace/.venv/bashenv.sh ENV=/tmp/bashenv.sh HOME=/tmp/home \\
    GIT_CONFIG_GLOBAL=/tmp/gitconfig GIT_EXTERNAL_DIFF=/tmp/bin/extdiff GIT_PAGER=/tmp/bin/extdiff \\
    GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=/tmp/bin/fsmonitor
`;

/** The marks as "what uid" lines, each once. */
const marks = (log: string) =>
  [
    ...new Set(
      log
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => /^\S+ \d+$/.test(l)),
    ),
  ].sort();

let repo = "";
beforeAll(async () => {
  const ctx = "/var/tmp/patchbay-test-rootenv-image";
  mkdirSync(ctx, { recursive: true });
  // The library is built here (the host's gcc), as an agent would bring its own.
  execFileSync("gcc", [
    "-shared",
    "-fPIC",
    "-O1",
    "-o",
    join(ctx, "evil.so"),
    new URL("../fixtures/root-env/evil.c", import.meta.url).pathname,
  ]);
  writeFileSync(join(ctx, "Dockerfile"), DOCKERFILE);
  const fixed = new Date("2026-01-01T00:00:00Z");
  for (const f of ["evil.so", "Dockerfile"]) utimesSync(join(ctx, f), fixed, fixed);
  await buildImageFrom(ctx, TAG, { log: () => {} });
  repo = mkdtempSync(join(tmpdir(), "pb-rootenv-"));
  writeFileSync(join(repo, "a.txt"), "hello\n");
  writeFileSync(join(repo, ".gitignore"), ".venv/\n");
}, 900_000);
afterAll(() => {
  if (repo) rmSync(repo, { recursive: true, force: true });
});
afterEach(closeScripted);

describe(
  "an image whose ENV points into /workspace and /tmp, with the agent's wrappers planted there",
  { timeout: 600_000 },
  () => {
    it("a whole job: setup, the agent, verify and the patch run no wrapper as root, and the patch and verify are right", async () => {
      const agentStep = `${PLANT}\necho fixed > a.txt\ngit status --short >/dev/null; python3 -c 'pass'; bash -c true; echo planted`;
      // Its second call reads the marks of everything so far (setup, the baseline, the snapshot's tar,
      // its own first call, the checkpoint); verify, in a sandbox of its own from the snapshot (the
      // wrappers in /workspace/.venv/bin are there), prints that sandbox's.
      const { result, fake } = await runScripted(
        [
          reply(toolUse("bash", { command: agentStep })),
          reply(toolUse("bash", { command: "cat /tmp/marks/log" })),
          reply(text("done")),
        ],
        {
          repo: { path: repo },
          image: TAG,
          setup: [PLANT],
          verify: "grep -qx fixed a.txt && { cat /tmp/marks/log; true; }",
          verifyRounds: 0,
        },
        "root-env",
      );
      expect(toolResultText(toolResults(fake.requests[1])[0])).toContain("planted");
      expect(result.status).toBe("completed");
      expect(result.filesChanged).toEqual(["a.txt"]);
      expect(result.patch).toMatch(/-hello\n\+fixed\n/);
      expect(result.verify?.exitCode).toBe(0);
      const job = marks(toolResultText(toolResults(fake.requests[2])[0]));
      const verify = marks(result.verify!.outputTail);
      // The wrappers work: the agent's own processes ran them (its git, python3, bash's BASH_ENV, the library), and verify's.
      expect(job).toEqual(
        expect.arrayContaining(["git 1000", "ld_preload 1000", "bash_env 1000", "sitecustomize 1000"]),
      );
      expect(verify).toEqual(expect.arrayContaining(["bash 1000", "timeout 1000", "bash_env 1000", "ld_preload 1000"]));
      expect([...job, ...verify].filter((m) => !m.endsWith(" 1000"))).toEqual([]);
    });

    it("every root process of the sandbox's own: the file agent's git, a root exec on the helper, the snapshot's tar, the egress bridge", async () => {
      const sb = await Sandbox.create({ image: TAG, labels: { "patchbay.test": "root-env" } });
      try {
        expect((await sb.exec(["bash", "-c", PLANT])).exitCode).toBe(0);
        // Root through the file agent (the git steps' way), and through the helper (the fallback's
        // `timeout` and a bare program), each running the programs root scripts use.
        const viaAgent = await sb.exec(
          ["bash", "-c", "git --version >/dev/null && env >/dev/null && sh -c true && python3 -c pass && echo ok"],
          { user: "0:0", cwd: "/" },
        );
        expect(viaAgent).toMatchObject({ exitCode: 0, stderr: "" });
        const out: Buffer[] = [];
        const p = await sb.box.attach(
          [
            "timeout",
            "-s",
            "KILL",
            "60",
            "bash",
            "-c",
            "tar --version >/dev/null && git --version >/dev/null && echo ok",
          ],
          (b) => out.push(Buffer.from(b)),
          { user: "0:0", cwd: "/" },
        );
        p.endInput();
        await p.ended;
        expect({ code: await p.exitCode(), out: Buffer.concat(out).toString() }).toEqual({ code: 0, out: "ok\n" });
        await sb.exportTar("/workspace", new Writable({ write: (_c, _e, cb) => cb() }), 64 << 20);
        // The bridge finds no egress socket here (no setup network) and says so, but its python3 ran.
        await expect(sb.bridgeEgress(1)).rejects.toThrow(/setup network bridge could not start/);
        // A root program where the agent writes is refused, and says why.
        await expect(sb.exec(["/workspace/.venv/bin/git", "--version"], { user: "0:0", cwd: "/" })).rejects.toThrow(
          /refused as a root program: owned by uid 1000/,
        );
        const log = (await sb.exec(["cat", "/tmp/marks/log"])).stdout.toString();
        expect(marks(log)).toEqual(expect.arrayContaining(["ld_preload 1000"]));
        expect(marks(log).filter((m) => !m.endsWith(" 1000"))).toEqual([]);
      } finally {
        await sb.destroy();
      }
    });
  },
);
