// The baseline's index is kept with its stat data (root's, in the private store), so the patch
// hashes only what changed. The agent (uid 1000) controls a file's mtime and size but not its
// ctime: a rewrite that keeps size and mtime must still reach the patch, also when it lands in
// the same second as the baseline (Debian's git compares ctime to the second only).
//
// Backend: Docker (the image's tar, git and tools).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { takeBaseline } from "../../src/job/baseline.js";
import { GIT } from "../../src/job/git-store.js";
import { checkpointDiff, computePatch } from "../../src/job/patch.js";
import { AnthropicModel } from "../../src/agent/model.js";
import { acquire, release, type Held } from "../../src/job/acquire.js";
import { runAgent } from "../../src/job/agent-phase.js";
import { jobContext } from "../../src/job/job-context.js";
import { prepare } from "../../src/job/prepare.js";
import { loadRepo, repoArchive, snapshotBaseline } from "../../src/job/repo/load.js";
import { loadConfig } from "../../src/core/config/config.js";
import { backendOf } from "../../src/backend/index.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { JobSpec } from "../../src/core/spec/spec.js";
import { reply, startFakeAnthropic, text } from "../support/fake-anthropic.js";

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-statcache-"));
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

function hostDir(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(tmpRoot, "r"));
  for (const [name, body] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), body);
  return dir;
}

async function withSandbox<T>(fn: (sb: Sandbox) => Promise<T>): Promise<T> {
  const sb = await Sandbox.create({ labels: { "patchbay.test": "patch-statcache" } });
  try {
    return await fn(sb);
  } finally {
    await sb.destroy();
  }
}

/** As the agent: a command in a fresh exec (uid 1000); its stdout. */
async function agent(sb: Sandbox, cmd: string): Promise<string> {
  const r = await sb.exec(["bash", "-c", cmd], { cwd: "/workspace" });
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.toString().trim();
}

/** The baseline index's stat data for one path, read by root (`git ls-files --debug`). */
async function indexEntry(sb: Sandbox, file: string): Promise<{ ctime: number; size: number }> {
  const cmd = `GIT_DIR=/patchbay/git GIT_INDEX_FILE=/patchbay/baseline.index GIT_WORK_TREE=/workspace GIT_CONFIG_NOSYSTEM=1 git -c safe.directory='*' ls-files --debug -- "$1"`;
  const r = await sb.exec(["bash", "-c", cmd, "x", file], { user: "0:0", cwd: "/workspace" });
  expect(r.exitCode, r.stderr).toBe(0);
  const out = r.stdout.toString();
  return { ctime: Number(/ctime: (\d+):/.exec(out)?.[1]), size: Number(/size: (\d+)/.exec(out)?.[1]) };
}

/**
 * The patch with no stat data at all: every file hashed into a fresh index of the private store
 * (what the patch does where no index is trusted), diffed as the patch is; nothing of the stat
 * cache read or changed. Its tree and binary patch.
 */
async function uncached(sb: Sandbox, baseline: string): Promise<{ tree: string; patch: string }> {
  const script = `${GIT}export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=/patchbay/oracle.index
rm -f "$GIT_INDEX_FILE"; "\${G[@]}" read-tree "$1"; "\${G[@]}" add -A; tree=$("\${G[@]}" write-tree); rm -f "$GIT_INDEX_FILE"
unset GIT_WORK_TREE GIT_INDEX_FILE; cd /patchbay; echo "$tree"
git -c safe.directory='*' diff --no-color --no-ext-diff --no-textconv --no-renames --full-index --src-prefix=a/ --dst-prefix=b/ --binary "$1" "$tree"`;
  const r = await sb.exec(["bash", "-c", script, "_", baseline], { user: "0:0" });
  expect(r.exitCode, r.stderr).toBe(0);
  const out = r.stdout.toString("utf8");
  const nl = out.indexOf("\n");
  return { tree: out.slice(0, nl), patch: out.slice(nl + 1) };
}

/** Same size, and the old mtime to the nanosecond: only ctime tells the rewrite. */
const FORGE = (file: string, body: string) =>
  `m=$(stat -c %.9Y ${file}); printf '${body}' > ${file}; touch -m -d "@$m" ${file}; stat -c '%.9Y %Z' ${file}`;

describe("the stat cache (real engine)", () => {
  it("keeps the baseline's stat data, and a rewrite with forged mtime and the same size still reaches the patch", async () => {
    const dir = hostDir({ "a.txt": "AAAA\n", "b.txt": "bbbb\n" });
    await withSandbox(async (sb) => {
      await loadRepo(sb, { path: dir });
      // Aged past the baseline's last second: this baseline keeps their stat data.
      const loaded = Number(await agent(sb, "stat -c %Z a.txt"));
      await agent(sb, `while [ $(date +%s) -le ${loaded + 2} ]; do sleep 0.2; done`);
      const baseline = await snapshotBaseline(sb);
      const entry = await indexEntry(sb, "a.txt");
      expect(entry.ctime).toBe(loaded); // cached, not smudged
      expect(entry.size).toBe(5);
      const before = await agent(sb, "stat -c %.9Y a.txt");
      const [mtime] = (await agent(sb, FORGE("a.txt", "ZZZZ\\n"))).split(" ");
      expect(mtime).toBe(before); // the agent did restore the mtime exactly
      const p = await computePatch(sb, baseline);
      expect(p.filesChanged).toEqual(["a.txt"]);
      expect(p.patch).toMatch(/^-AAAA$/m);
      expect(p.patch).toMatch(/^\+ZZZZ$/m);
      // The same as with every file hashed again.
      expect(await uncached(sb, baseline)).toEqual({ tree: p.tree, patch: p.patch });
    });
  }, 180_000);

  it("a file written in the baseline's last second keeps no stat data, so a same-second forged rewrite reaches the patch", async () => {
    const dir = hostDir({ "a.txt": "AAAA\n", "r.txt": "rrrr\n" });
    await withSandbox(async (sb) => {
      await loadRepo(sb, { path: dir });
      // a.txt aged past the baseline's last second, so that the baseline keeps an index at all.
      const loaded = Number(await agent(sb, "stat -c %Z a.txt"));
      await agent(sb, `while [ $(date +%s) -le ${loaded + 2} ]; do sleep 0.2; done`);
      // The agent rewrites r.txt in place, same bytes, every 50 ms while the baseline is taken: its
      // ctime is always within the baseline's last second.
      await agent(
        sb,
        "nohup bash -c 'while :; do printf rrrr 1<> r.txt; sleep 0.05; done' >/dev/null 2>&1 & sleep 0.3",
      );
      const baseline = await snapshotBaseline(sb);
      await sb.killAgentProcesses();
      expect(await indexEntry(sb, "r.txt")).toEqual({ ctime: 0, size: 0 }); // no stat data: hashed again at the patch
      expect((await indexEntry(sb, "a.txt")).size).toBe(5); // a.txt keeps its own
      const [, ctime] = (await agent(sb, FORGE("r.txt", "XXXX\\n"))).split(" ");
      const p = await computePatch(sb, baseline);
      expect(p.filesChanged, `rewritten at ${ctime}`).toEqual(["r.txt"]);
      expect(p.patch).toMatch(/^-rrrr$/m);
      expect(p.patch).toMatch(/^\+XXXX$/m);
    });
  }, 300_000);

  it("smudge, with gawk and without: exactly the recent entries lose their stat data, whatever their names", async () => {
    // Names that would break a split on tabs, lines or quotes; "pa" is old, "pa\tth" recent.
    const recent = [
      "pa\tth",
      "new\nline.txt",
      "tab\there.txt",
      "back\\slash.txt",
      "-dash.txt",
      " lead.txt",
      'quote"d.txt',
      "star*.txt",
      "trail\t",
    ];
    const dir = hostDir({ pa: "old\n", "old.txt": "old\n" });
    await withSandbox(async (sb) => {
      await loadRepo(sb, { path: dir });
      const loaded = Number(await agent(sb, "stat -c %Z old.txt"));
      await agent(sb, `while [ $(date +%s) -le ${loaded + 2} ]; do sleep 0.2; done`);
      // The second the recent files were written in: each smudge below is taken as of it (taken as of
      // its own run, the second one, seconds later under load, once found nothing recent).
      const made = await sb.exec(
        ["bash", "-c", 'printf "%(%s)T" -1; for n in "$@"; do printf "x%s\\n" "$n" > "./$n"; done', "_", ...recent],
        { cwd: "/workspace" },
      );
      expect(made.exitCode, made.stderr).toBe(0);
      const writtenAt = Number(made.stdout.toString());
      expect(writtenAt).toBeGreaterThan(loaded + 2);
      // The prelude's own smudge on a fresh index of everything, then each entry's size (0: smudged).
      const smudged = async (hideGawk: boolean) => {
        const hide = hideGawk
          ? 'command() { if [ "$1 $2" = "-v gawk" ]; then return 1; fi; builtin command "$@"; }\n'
          : "";
        const script = `${GIT}${hide}export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=/patchbay/t.index
rm -f "$GIT_INDEX_FILE"; "\${G[@]}" add -A
smudge ${writtenAt}
for n in "$@"; do "\${G[@]}" --literal-pathspecs ls-files --debug -- "$n" | grep -o "size: [0-9]*" | tr -d "\\n"; echo; done`;
        const r = await sb.exec(["bash", "-c", script, "_", "pa", "old.txt", ...recent], { user: "0:0" });
        expect(r.exitCode, r.stderr).toBe(0);
        return r.stdout.toString().trimEnd().split("\n");
      };
      // Old entries keep their stat data (size 4); every recent one is smudged (size 0).
      const want = ["size: 4", "size: 4", ...recent.map(() => "size: 0")];
      expect(await smudged(false)).toEqual(want);
      expect(await smudged(true)).toEqual(want);
    });
  }, 180_000);

  it("a repo loaded within the second keeps no index; the baseline after setup does, and its patch matches one made without it", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 200; i++) files[`f${i}.txt`] = `file ${i}\n`;
    const dir = hostDir(files);
    // An index is used only where baseline.tree names it (its stat data trusted).
    const hasIndex = async (sb: Sandbox) =>
      (
        await sb.exec(["test", "-e", "/patchbay/baseline.index", "-a", "-e", "/patchbay/baseline.tree"], {
          user: "0:0",
        })
      ).exitCode === 0;
    await withSandbox(async (sb) => {
      await loadRepo(sb, { path: dir });
      // Every file's ctime is within the baseline's last second: all would be smudged, so none is kept.
      expect(await hasIndex(sb)).toBe(false);
      const loaded = Number(await agent(sb, "stat -c %Z f1.txt"));
      await agent(sb, `while [ $(date +%s) -le ${loaded + 2} ]; do sleep 0.2; done; printf 'setup\\n' > built.txt`);
      const baseline = await snapshotBaseline(sb); // as after setup
      expect(await hasIndex(sb)).toBe(true);
      await agent(sb, "printf 'changed\\n' > f7.txt; rm f9.txt; printf 'new\\n' > n.txt; chmod +x f11.txt");
      const cached = await computePatch(sb, baseline);
      expect(cached.filesChanged).toEqual(["f11.txt", "f7.txt", "f9.txt", "n.txt"]);
      expect(await uncached(sb, baseline)).toEqual({ tree: cached.tree, patch: cached.patch });
    });
  }, 180_000);

  it("the baseline skips the smudge's scan only where the load began within its window (PB_LOADED_SINCE)", async () => {
    const dir = hostDir({ "a.txt": "AAAA\n", "b.txt": "bbbb\n" });
    const hasTree = async (sb: Sandbox) =>
      (await sb.exec(["test", "-e", "/patchbay/baseline.tree"], { user: "0:0" })).exitCode === 0;
    await withSandbox(async (sb) => {
      await loadRepo(sb, { path: dir });
      expect(await hasTree(sb)).toBe(false); // loaded within the second: every file would be smudged
      const loaded = Number(await agent(sb, "stat -c %Z a.txt"));
      await agent(sb, `while [ $(date +%s) -le ${loaded + 2} ]; do sleep 0.2; done`);
      // The files are older than the window now: a baseline told the load began then scans and keeps the cache...
      await takeBaseline(sb, [], { loadedSince: loaded });
      expect(await hasTree(sb)).toBe(true);
      expect((await indexEntry(sb, "a.txt")).ctime).toBe(loaded);
      // ...and one told the load began within the window skips the scan: no cache, as after a failed smudge.
      await takeBaseline(sb, [], { loadedSince: Math.floor(Date.now() / 1000) });
      expect(await hasTree(sb)).toBe(false);
    });
  }, 180_000);

  it("a deferred smudge (off the ready path): no trusted index until it ran, then the same index as an inline one", async () => {
    const dir = hostDir({ "a.txt": "AAAA\n", "b.txt": "bbbb\n" });
    const hasTree = async (sb: Sandbox) =>
      (await sb.exec(["test", "-e", "/patchbay/baseline.tree"], { user: "0:0" })).exitCode === 0;
    const debug = async (sb: Sandbox) =>
      (
        await sb.exec(
          ["bash", "-c", "GIT_DIR=/patchbay/git GIT_INDEX_FILE=/patchbay/baseline.index git ls-files --debug"],
          { user: "0:0" },
        )
      ).stdout.toString();
    await withSandbox(async (sb) => {
      await loadRepo(sb, { path: dir });
      const loaded = Number(await agent(sb, "stat -c %Z a.txt"));
      await agent(sb, `while [ $(date +%s) -le ${loaded + 2} ]; do sleep 0.2; done`);
      await takeBaseline(sb, [], { loadedSince: loaded });
      const inline = await debug(sb);
      // The deferred exec is held back until the test lets it go (the file agent would otherwise
      // run it before any check of ours, which waits behind it).
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const exec = sb.exec.bind(sb);
      sb.exec = async (argv, o) =>
        o?.env?.some((e) => e.startsWith("PB_SMUDGE=")) ? (await held, exec(argv, o)) : exec(argv, o);
      const b = await takeBaseline(sb, [], { loadedSince: loaded, deferSmudge: true });
      expect(await hasTree(sb)).toBe(false); // the baseline is known, its index not yet trusted
      release();
      await b.agentRepo;
      expect(await hasTree(sb)).toBe(true);
      expect(await debug(sb)).toBe(inline);
      expect((await indexEntry(sb, "a.txt")).ctime).toBe(loaded);
    });
  }, 180_000);

  it("a repo loaded within the second gets its stat data at the first patch two seconds on; forged rewrites before and after that still reach the patch", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 200; i++) files[`f${i}.txt`] = `file ${i}\n`;
    const dir = hostDir(files);
    const exists = async (sb: Sandbox, f: string) => (await sb.exec(["test", "-e", f], { user: "0:0" })).exitCode === 0;
    await withSandbox(async (sb) => {
      const { baseline } = await loadRepo(sb, { path: dir });
      // (Usually no index is kept: every file is that recent. A slow load may keep one for some.)
      const marker = await sb.exec(["cat", "/patchbay/baseline.refresh"], { user: "0:0" });
      expect(marker.exitCode).toBe(0);
      const [since, tree] = marker.stdout.toString().trim().split(" ");
      expect(tree).toBe(baseline);
      // Before the refresh, as soon as the agent can: a same-size rewrite with the mtime put back.
      await agent(sb, FORGE("f1.txt", "FFFFFF\\n"));
      // Usually too early to refresh (every file hashed); on a slow run it may refresh here already.
      // Either way the forged rewrite came before the refresh, and is compared, never trusted.
      const early = await computePatch(sb, baseline);
      expect(early.filesChanged).toEqual(["f1.txt"]);
      const loaded = Number(await agent(sb, "stat -c %Z f2.txt"));
      // The refresh is due. Read on the refresh's own clock (bash's `%(%s)T`, time(2): the coarse
      // clock, which may still say the last second a few ms after `date`'s says the next; CI once
      // ran the patch in that gap, and the refresh rightly waited).
      await agent(sb, `while [ $(printf '%(%s)T' -1) -lt ${Number(since) + 2} ]; do sleep 0.2; done`);
      const p = await computePatch(sb, baseline); // refreshes (unless done already), then stages from the refreshed index
      expect(p.filesChanged).toEqual(["f1.txt"]);
      expect(await exists(sb, "/patchbay/baseline.refresh")).toBe(false); // once
      expect(await indexEntry(sb, "f2.txt")).toEqual({ ctime: loaded, size: 7 }); // stat data now
      expect((await indexEntry(sb, "f1.txt")).size).toBe(0); // changed by the agent: never trusted
      // After the refresh: another forged rewrite, caught by its ctime.
      await agent(sb, FORGE("f3.txt", "GGGGGG\\n"));
      const after = await computePatch(sb, baseline);
      expect(after.filesChanged).toEqual(["f1.txt", "f3.txt"]);
      expect(after.patch).toMatch(/^\+GGGGGG$/m);
      expect(await uncached(sb, baseline)).toEqual({ tree: after.tree, patch: after.patch });
      // A checkpoint: the same patch; with the last checkpoint's tree unchanged, no diff is taken
      // (the sentinel comes back); after a change, the new patch.
      const cp = await checkpointDiff(sb, baseline);
      expect(cp.patch).toBe(after.patch);
      expect(cp.tree).toBe(after.tree);
      expect((await checkpointDiff(sb, baseline, { last: { tree: cp.tree, patch: "SENTINEL" } })).patch).toBe(
        "SENTINEL",
      );
      await agent(sb, "echo more >> f4.txt");
      const next = await checkpointDiff(sb, baseline, { last: { tree: cp.tree, patch: "SENTINEL" } });
      expect(next.tree).not.toBe(cp.tree);
      expect(next.patch).toMatch(/^\+more$/m);
    });
  }, 180_000);
});

describe("the worker's tree of what it sent, taken at once and checked by git's hash (real engine)", () => {
  /** Before git's hash of the files (baseline.sh's first exec), once the worker's tree was taken: `then`, as root. */
  function beforeGitsBaseline(sb: Sandbox, then: string): { tampered: () => boolean } {
    let done = false;
    const exec = sb.exec.bind(sb);
    sb.exec = async (argv, o) => {
      if (!done && String(argv[2] ?? "").includes("# baseline.sh")) {
        done = true;
        expect((await exec(["bash", "-c", then], { user: "0:0", cwd: "/workspace" })).exitCode).toBe(0);
      }
      return exec(argv, o);
    };
    return { tampered: () => done };
  }

  it("is the baseline at once, and git's own tree of the bytes on disk replaces it where they differ", async () => {
    const dir = hostDir({ "a.txt": "AAAA\n", "b.txt": "bbbb\n" });
    await withSandbox(async (sb) => {
      const archive = await repoArchive({ path: dir });
      expect(await sb.putTarStream("/workspace", archive.stream)).toBe(true);
      await archive.cleanup();
      const pack = await archive.blobs.finish();
      const sent = pack?.tree ?? "";
      expect(sent).toMatch(/^[0-9a-f]{40}$/);
      const same = await takeBaseline(sb, [], { pack, sent });
      expect(same.tree).toBe(sent);
      expect(await same.checked).toBe(sent);
      await same.agentRepo;
      expect((await uncached(sb, sent)).patch).toBe(""); // the worker's tree is the files on disk
      // Bytes on disk that are not what the worker sent: its tree is taken at once, git's replaces it.
      await sb.exec(["bash", "-c", "printf changed > a.txt"], { user: "0:0", cwd: "/workspace" });
      const other = await takeBaseline(sb, [], { pack, sent });
      expect(other.tree).toBe(sent);
      const checked = await other.checked;
      expect(checked).not.toBe(sent);
      expect(await uncached(sb, checked)).toEqual({ tree: checked, patch: "" });
      // Without the worker's tree, or with symlinks to make in the container, no shortcut: git hashes at once.
      expect((await takeBaseline(sb, [], { pack })).tree).toBe(checked);
      const linked = await takeBaseline(sb, [{ name: "up", target: "../x" }], { pack, sent });
      expect(linked.tree).not.toBe(sent);
      expect(await linked.checked).toBe(linked.tree);
    });
  }, 180_000);

  it("a job's prepare: the baseline its agent and patch use is git's tree where the files differ from what was sent", async () => {
    const dir = hostDir({ "a.txt": "AAAA\n", "b.txt": "bbbb\n" });
    const spec = JobSpec.parse({ task: "t", repo: { path: dir } });
    const { ctx, dispose } = jobContext(spec, loadConfig(), {
      backend: backendOf("docker"),
      labels: { "patchbay.test": "patch-statcache" },
    });
    const held: Held = { removals: [] };
    try {
      const sb = await acquire(ctx, held);
      const hook = beforeGitsBaseline(sb, "printf changed > a.txt");
      const prep = await prepare(ctx, sb, held, performance.now());
      if ("stopped" in prep) throw new Error("stopped");
      const sent = prep.baseline;
      await prep.loaded;
      expect(hook.tampered()).toBe(true);
      expect(prep.baseline).not.toBe(sent);
      expect(await uncached(sb, prep.baseline)).toEqual({ tree: prep.baseline, patch: "" });
      expect((await computePatch(sb, prep.baseline)).filesChanged).toEqual([]);
    } finally {
      await release(held);
      dispose();
    }
  }, 180_000);

  it("git's check failing after ready (the engine went, say) fails the job where it is awaited; nothing rejects unhandled meanwhile", async () => {
    const dir = hostDir({ "a.txt": "AAAA\n" });
    const fake = await startFakeAnthropic([reply(text("Done."))]);
    const model = new AnthropicModel({ apiKey: "k", baseURL: fake.url, maxRetries: 0 });
    const spec = JobSpec.parse({ task: "t", repo: { path: dir } });
    const { ctx, dispose } = jobContext(spec, loadConfig(), {
      backend: backendOf("docker"),
      model,
      labels: { "patchbay.test": "patch-statcache" },
    });
    const held: Held = { removals: [] };
    try {
      const sb = await acquire(ctx, held);
      // Git's hash (baseline.sh, once the worker's tree was taken) fails, slowly: the agent's first
      // model request is answered meanwhile and nothing awaits the check yet.
      let failed = false;
      const exec = sb.exec.bind(sb);
      sb.exec = async (argv, o) => {
        const r = await exec(argv, o);
        if (!String(argv[2] ?? "").includes("# baseline.sh")) return r;
        await new Promise((w) => setTimeout(w, 1500));
        failed = true;
        return { ...r, exitCode: 1, stderr: "injected\n" };
      };
      const prep = await prepare(ctx, sb, held, performance.now());
      if ("stopped" in prep) throw new Error("stopped");
      expect(failed).toBe(false); // ready before git's hash ended: the worker's tree was taken
      const agent = await runAgent(ctx, sb, prep);
      expect(agent.outcome.status).toBe("completed");
      await new Promise((w) => setTimeout(w, 2000)); // the check has failed by now, unawaited
      await expect(agent.settled).rejects.toThrow(/making the baseline with git failed \(exit 1\): injected/);
    } finally {
      await release(held);
      dispose();
      await fake.close();
    }
  }, 180_000);
});
