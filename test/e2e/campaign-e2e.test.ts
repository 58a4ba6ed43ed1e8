// Campaigns end to end, as a user runs them: a private Redis, two worker processes on the local
// backend (test/support/backend.ts: the subject is the queue and publishing, not Docker), the real
// SDK against the scripted model, twelve repositories served by git's own `git http-backend` with
// basic auth, and the GitHub stand-in that checks every request against GitHub's published OpenAPI
// description (test/support/github-fake.ts), its branches read from the same bare repositories.
// `patchbay campaign ...` runs as a process; the token is checked to be nowhere it should not be.
//
// Backend: local (worker processes: `LOCAL_WORKER_ENV`).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenVariable } from "../../src/core/config/forges.js";
import type { CampaignStatus } from "../../src/campaign/track.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic, type Reply } from "../support/fake-anthropic.js";
import { cli, removeDir, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { ensureBuilt } from "../support/cli-helpers.js";
import { byTurn, taskOf } from "../support/scripts.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { git, makeBugRepo } from "../support/bug-repo.js";
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";
import { startGitHubFake, type GitHubFake } from "../support/github-fake.js";
import { GitLabFake } from "../support/gitlab-fake.js";
import { startGitSsh, type GitSsh } from "../support/git-ssh.js";
import { BIN } from "../support/cli-helpers.js";
import { spawn } from "node:child_process";

const QUEUE = "campaign-e2e";
const TOKEN = "ghp_campaignE2Etoken0123456789abcdef";
const READ_TOKEN = "ghp_readonlyE2Etoken0123456789abcdef";
const READER = { username: "reader", password: "reader-secret-0123456789" };
const GL_TOKEN = "glpat-campaignE2Etoken0123456789";
const PUSHER = { username: "pusher", password: "pusher-secret-0123456789" };
const names = Array.from({ length: 12 }, (_, i) => `r${String(i + 1).padStart(2, "0")}`);
const DONE = reply(text("Fixed the bug: app.txt now says fixed.\n\ncc @octocat, closes #1"));

describe("patchbay campaign end to end", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let anthropic: FakeAnthropic;
  let github: GitHubFake;
  let server: GitHttpServer;
  let readOnly: GitHttpServer;
  let gitlab: GitLabFake;
  let glServer: GitHttpServer;
  let glPlain: GitHttpServer;
  let ssh: GitSsh;
  let workers: WorkerProc[] = [];
  let dir: string;
  let root: string;
  let env: Record<string, string>;
  let cliEnv: Record<string, string>;
  const outputs: string[] = [];
  const run = async (args: string[], timeoutMs = 300_000) => {
    const r = await cli(args, cliEnv, { timeoutMs });
    outputs.push(r.stdout, r.stderr);
    return r;
  };
  const bare = (name: string) => join(root, "acme", `${name}.git`);
  const url = (name: string, s = server) => `${s.url}/acme/${name}.git`;

  /** A bare repo acme/<name> with main: app.txt holding the bug the campaign fixes. */
  const makeRepo = (name: string) => makeBugRepo(dir, bare(name), name);

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), "pb-campaign-e2e-"));
    root = join(dir, "git");
    mkdirSync(join(root, "acme"), { recursive: true });
    for (const n of [...names, "bad1", "bad2", "ro", "s1", "g1", "g2"]) makeRepo(n);
    server = await startGitHttp(root, {
      users: [
        { ...READER, rights: "read" },
        { username: "x-access-token", password: TOKEN, rights: "write" },
      ],
    });
    readOnly = await startGitHttp(root, {
      users: [
        { ...READER, rights: "read" },
        { username: "x-access-token", password: READ_TOKEN, rights: "read" },
      ],
    });
    github = await startGitHubFake();
    // GitLab: one host with an API token (g1), one without (g2: git push -o merge_request.create,
    // with the user's own credential helper); and SSH (s1: a plain remote).
    glServer = await startGitHttp(root, {
      users: [
        { ...READER, rights: "read" },
        { username: "oauth2", password: GL_TOKEN, rights: "write" },
      ],
    });
    glPlain = await startGitHttp(root, {
      users: [
        { ...READER, rights: "read" },
        { ...PUSHER, rights: "write" },
      ],
    });
    gitlab = await new GitLabFake().start();
    gitlab.addProject("acme/g1", {});
    gitlab.branchesFrom("acme/g1", bare("g1"));
    gitlab.grant(GL_TOKEN, "acme/g1", "write");
    git(bare("g2"), "config", "receive.advertisePushOptions", "true");
    const hook = join(bare("g2"), "hooks", "pre-receive");
    writeFileSync(
      hook,
      `#!/bin/sh\ni=0\nwhile [ $i -lt "\${GIT_PUSH_OPTION_COUNT:-0}" ]; do eval "echo \\$GIT_PUSH_OPTION_$i" >> "${join(dir, "push-options.txt")}"; i=$((i+1)); done\n`,
      { mode: 0o755 },
    );
    ssh = await startGitSsh();
    for (const n of [...names, "bad1", "bad2", "ro"]) {
      github.addRepo(`acme/${n}`);
      github.branchesFrom(`acme/${n}`, bare(n));
      github.grant(TOKEN, `acme/${n}`, "write");
      github.grant(READ_TOKEN, `acme/${n}`, "read");
    }
    // The model fixes the bug, except in r10 and r11, where it edits something else: their verify fails.
    anthropic = await startFakeAnthropic(
      byTurn((body): Reply[] => {
        const task = taskOf(body);
        const fix = /in (r10|r11)\b/.test(task) ? "echo unrelated > notes.txt" : "sed -i 's/= bug/= fixed/' app.txt";
        return [reply(toolUse("bash", { command: `cd /workspace && ${fix}` })), DONE];
      }),
    );
    const store = join(dir, "git-credentials");
    writeFileSync(
      store,
      [server, readOnly, glServer, glPlain]
        .map((x) => `${x.url.replace("://", `://${READER.username}:${READER.password}@`)}\n`)
        .join(""),
      { mode: 0o600 },
    );
    env = {
      ...LOCAL_WORKER_ENV,
      ...ssh.env,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: anthropic.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_CONCURRENCY: "2",
      PATCHBAY_GIT_CREDENTIALS: store,
    };
    // The publishing host: the forge's token, its API for the git server's host, a HOME of its own.
    cliEnv = {
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      HOME: join(dir, "home"),
      XDG_CACHE_HOME: join(dir, "cache"),
      PATCHBAY_FORGES: `${server.host}=github@${github.url},${readOnly.host}=github@${github.url},${glServer.host}=gitlab@${gitlab.url},${glPlain.host}=gitlab@${gitlab.url}`,
      [tokenVariable(server.host)]: TOKEN,
      [tokenVariable(readOnly.host)]: READ_TOKEN,
      [tokenVariable(glServer.host)]: GL_TOKEN,
      ...ssh.env,
      GIT_TERMINAL_PROMPT: "0",
      GIT_CONFIG_NOSYSTEM: "1",
    };
    mkdirSync(cliEnv.HOME!, { recursive: true });
    // The user's own git credentials for the host without a token (git's store helper, as a user has it).
    writeFileSync(
      join(cliEnv.HOME!, ".git-credentials"),
      `${glPlain.url.replace("://", `://${PUSHER.username}:${PUSHER.password}@`)}\n`,
      { mode: 0o600 },
    );
    writeFileSync(join(cliEnv.HOME!, ".gitconfig"), "[credential]\n\thelper = store\n");
    workers = [startWorkerProc(env), startWorkerProc(env)];
    await Promise.all(workers.map((w) => w.waitFor(new RegExp(`ready: queue ${QUEUE}`), 180_000)));
  }, 600_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop("SIGTERM")));
    await anthropic?.close();
    await github?.stop();
    await server?.close();
    await readOnly?.close();
    await glServer?.close();
    await glPlain?.close();
    await gitlab?.stop();
    await ssh?.close();
    await redis?.stop();
    if (dir) removeDir(dir);
  });

  const campaignFile = (name: string, repos: string[], extra = "") => {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(
      file,
      `name: ${name}\ntask: "Fix the bug in {{name}}: app.txt must say fixed."\nverify: grep -q 'value = fixed' app.txt\nverifyRounds: 0\nrepos:\n${repos.map((r) => `  - git: ${r}\n    ref: main\n`).join("")}publish:\n  title: "Fix the bug in {{name}}"\n  commit:\n    author: Campaign Bot <bot@example.com>\n${extra}`,
    );
    return file;
  };
  const status = async (id: string): Promise<CampaignStatus> => {
    const r = await run(["campaign", "status", id, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as CampaignStatus;
  };
  const stateOf = (st: CampaignStatus) =>
    Object.fromEntries(st.changesets.map((c) => [c.repo.replace(/^.*\/(\w+)\.git$/, "$1"), c.state]));
  const writes = () => github.requests.filter((r) => r.method !== "GET").length;
  const branchOf = (name: string) =>
    git(bare(name), "for-each-ref", "--format=%(objectname)", "refs/heads/patchbay/fix-all");

  it("12 repositories on 2 workers: 9 draft PRs, 2 verify_failed unpublished, 1 conflict; re-publish changes nothing; tracked to merged/closed/failing; retried and closed", async () => {
    const file = campaignFile(
      "fix-all",
      names.map((n) => url(n)),
    );
    const out = join(dir, "out");
    const ran = await run(["campaign", "run", file, "--out", out], 900_000);
    expect(ran.code, ran.stderr).toBe(3); // the worst job: verify_failed
    expect(JSON.parse(readFileSync(join(out, "summary.json"), "utf8"))).toMatchObject({
      campaignId: "fix-all",
      changesetCounts: { unpublished: 12 },
      counts: { completed: 10, verify_failed: 2 },
      // nothing merged yet: no cost per merged change
      costPerMergedUsd: null,
    });
    expect(readFileSync(join(out, "summary.md"), "utf8")).toMatch(
      /\nCost: \$\S+ spent, n\/a per merged change \(none merged\)\.\n/,
    );

    // After the jobs ran, r12's main moves with a commit on the line the patch changes.
    const work = mkdtempSync(join(dir, "moved-"));
    git(dir, "clone", "-q", bare("r12"), work);
    writeFileSync(join(work, "app.txt"), "name = r12\nvalue = bug # moved\n");
    git(work, "commit", "-qam", "someone else's change");
    git(work, "push", "-q", "origin", "main");

    const dry = await run(["campaign", "publish", "fix-all", "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout.match(/\tpatchbay\/fix-all\tFix the bug in r\d\d/g)).toHaveLength(10);
    expect(dry.stdout).toMatch(/app\.txt \| 2 \+-/);
    expect(github.requests).toHaveLength(0);
    expect(names.map(branchOf)).toEqual(names.map(() => ""));

    const pub = await run(["campaign", "publish", "fix-all"]);
    expect(pub.code, pub.stderr).toBe(0);
    expect(pub.stderr).toMatch(/campaign fix-all: 9 open \(9 draft\), 1 conflict, 2 unpublished/);
    const st = await status("fix-all");
    expect(stateOf(st)).toEqual({
      r01: "draft",
      r02: "draft",
      r03: "draft",
      r04: "draft",
      r05: "draft",
      r06: "draft",
      r07: "draft",
      r08: "draft",
      r09: "draft",
      r10: "unpublished",
      r11: "unpublished",
      r12: "conflict",
    });
    expect(st.changesets.find((c) => c.line === 12)!.reason).toMatch(
      /conflicts in app\.txt: campaign retry --status conflict/,
    );
    expect(st.changesets.find((c) => c.line === 10)!.reason).toMatch(/verify failed|its verify failed/);
    for (const n of names.slice(0, 9)) {
      const pulls = github.allPulls(`acme/${n}`);
      expect(pulls).toHaveLength(1);
      const p = pulls[0]!;
      expect(p).toMatchObject({
        draft: true,
        state: "open",
        title: `Fix the bug in ${n}`,
        head: { ref: "patchbay/fix-all" },
        base: { ref: "main" },
      });
      expect(p.body).toContain("Fixed the bug: app.txt now says fixed.");
      expect(p.body).toContain("grep -q 'value = fixed' app.txt");
      expect(p.body).toMatch(/app\.txt \| 2 \+-/);
      expect(p.body).toContain(`Fix the bug in ${n}: app.txt must say fixed.`); // the task
      expect(p.body).toMatch(/exit 0 \(passed\)/); // the verify's result
      expect(p.body).toMatch(/\| Cost \| \$\d+\.\d{4} \|/);
      expect(p.body).toContain(`\`patchbay result fix-all-L${Number(n.slice(1))} --out DIR\` (DIR/transcript.html)`);
      expect(p.body).toContain("@\u200bocto"); // the model's @mention does not ping
      expect(p.head.sha).toBe(branchOf(n));
      expect(git(bare(n), "diff", "main", "patchbay/fix-all")).toMatch(/-value = bug\n\+value = fixed/);
      expect(git(bare(n), "log", "-1", "--format=%an <%ae>|%s", "patchbay/fix-all")).toBe(
        `Campaign Bot <bot@example.com>|fix-all: Fixed the bug: app.txt now says fixed.`,
      );
    }
    expect(github.allPulls("acme/r12")).toHaveLength(0);
    expect(branchOf("r10") + branchOf("r11") + branchOf("r12")).toBe("");
    expect(github.violations).toEqual([]);

    // Publishing again changes nothing: no write to the forge, the same branches.
    const before = { writes: writes(), heads: names.map(branchOf) };
    const again = await run(["campaign", "publish", "fix-all"]);
    expect(again.code, again.stderr).toBe(0);
    expect({ writes: writes(), heads: names.map(branchOf) }).toEqual(before);

    // Tracking on the queue is scheduled while changesets are open.
    const tq = new Queue(`${QUEUE}-campaigns`, { connection: { url: redis.url } });
    expect((await tq.getJobSchedulers()).map((s) => s.key)).toContain("track:fix-all");

    // The forge moves on: 4 merged, 1 closed, 2 with failing checks.
    for (const n of [1, 2, 3, 4]) github.merge(`acme/r0${n}`, github.allPulls(`acme/r0${n}`)[0]!.number);
    github.close("acme/r05", github.allPulls("acme/r05")[0]!.number);
    for (const n of ["r06", "r07"]) github.setChecks(`acme/${n}`, branchOf(n), "failing");
    github.setChecks("acme/r08", branchOf("r08"), "passing");
    const tracked = await run(["campaign", "track", "fix-all"]);
    expect(tracked.code, tracked.stderr).toBe(0);
    const st2 = await status("fix-all");
    expect(st2.counts).toEqual({ unpublished: 2, draft: 4, open: 0, merged: 4, closed: 1, conflict: 1 });
    expect(st2.checks).toEqual({ passing: 1, failing: 2, pending: 0 });
    expect(
      Object.fromEntries(st2.changesets.filter((c) => c.checks === "failing").map((c) => [c.line, c.state])),
    ).toEqual({ 6: "draft", 7: "draft" });
    // the whole spend (every attempt of every job) over the 4 merged
    expect(st2.costPerMergedUsd).toBeCloseTo(st2.batch.spentUsd / 4, 12);
    const text = await run(["campaign", "status", "fix-all"]);
    expect(text.stdout).toMatch(/^campaign fix-all: 4 merged of 12/);
    expect(text.stdout).toMatch(/^cost: \$\S+ spent, \$\S+ per merged change \(4 merged\)$/m);

    // The conflict runs again on the new base, and publishes.
    const retried = await run(["campaign", "retry", "fix-all", "--status", "conflict"]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout.trim()).toBe("fix-all-L12-r1");
    const waited = await run(["batch", "wait", "fix-all"], 600_000);
    expect(waited.code).toBe(3);
    const pub2 = await run(["campaign", "publish", "fix-all"]);
    expect(pub2.code, pub2.stderr).toBe(0);
    expect(stateOf(await status("fix-all")).r12).toBe("draft");
    expect(git(bare("r12"), "diff", "main", "patchbay/fix-all")).toMatch(
      /-value = bug # moved\n\+value = fixed # moved/,
    );

    // Close: the open ones (4 drafts and r12) closed, their branches deleted; merged ones untouched.
    const refused = await run(["campaign", "close", "fix-all"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--yes/);
    const closed = await run(["campaign", "close", "fix-all", "--yes"]);
    expect(closed.code, closed.stderr).toBe(0);
    expect(closed.stderr).toMatch(/5 closed/);
    const st3 = await status("fix-all");
    expect(st3.counts).toEqual({ unpublished: 2, draft: 0, open: 0, merged: 4, closed: 6, conflict: 0 });
    for (const n of ["r06", "r07", "r08", "r09", "r12"]) {
      expect(github.allPulls(`acme/${n}`)[0]!.state).toBe("closed");
      expect(branchOf(n)).toBe("");
    }
    expect(branchOf("r01")).not.toBe("");
    expect((await tq.getJobSchedulers()).map((s) => s.key)).not.toContain("track:fix-all");
    await tq.close();
    expect(github.violations).toEqual([]);
  }, 1_800_000);

  it("bad input: a bad campaign line enqueues nothing; a URL that does not resolve, a token without push rights and a foreign branch each stay on their own repository", async () => {
    const badFile = join(dir, "broken.yaml");
    writeFileSync(
      badFile,
      `name: broken\ntask: t\nrepos:\n  - git: ${url("bad1")}\n  - { git: ${url("bad2")}, overrides: { maxTurns: 0 } }\n`,
    );
    const sub = await run(["campaign", "submit", badFile]);
    expect(sub.code).toBe(2);
    expect(sub.stderr).toMatch(/broken\.yaml:5: repos\[1\] .*maxTurns/);
    const probe = new Redis(redis.url);
    expect(await probe.keys("*broken*")).toEqual([]);

    // bad1 gets a branch with someone else's commit first.
    const work = mkdtempSync(join(dir, "foreign-"));
    git(dir, "clone", "-q", bare("bad1"), work);
    git(work, "checkout", "-qb", "patchbay/edge");
    writeFileSync(join(work, "other.txt"), "theirs\n");
    git(work, "add", "-A");
    git(work, "commit", "-qm", "a commit patchbay did not make");
    git(work, "push", "-q", "origin", "patchbay/edge");
    const foreign = git(bare("bad1"), "rev-parse", "patchbay/edge");

    const file = campaignFile("edge", [
      "http://127.0.0.1:9/acme/nowhere.git",
      url("bad1"),
      url("ro", readOnly),
      url("bad2"),
    ]);
    const ran = await run(["campaign", "run", file, "--out", join(dir, "out-edge")], 600_000);
    expect(ran.code).toBe(1); // the worst job: the repo that does not resolve failed
    const pub = await run(["campaign", "publish", "edge"]);
    expect(pub.code).toBe(1); // the read-only token's repository failed to publish; the others went on
    const st = await status("edge");
    const by = Object.fromEntries(st.changesets.map((c) => [c.line, c]));
    expect(by[1]).toMatchObject({
      state: "unpublished",
      reason: expect.stringMatching(
        /its job ended failed: repo\.git http:\/\/127\.0\.0\.1:9\/acme\/nowhere\.git: git clone failed/,
      ),
    });
    expect(by[2]).toMatchObject({
      state: "unpublished",
      reason: expect.stringMatching(
        /branch patchbay\/edge is at [0-9a-f]{12}, a commit patchbay did not push: publish --force replaces it/,
      ),
    });
    expect(by[3]).toMatchObject({
      state: "unpublished",
      reason: expect.stringMatching(/publish failed: the credentials for 127\.0\.0\.1:\d+ cannot push to/),
    });
    expect(by[4]).toMatchObject({ state: "draft" });
    expect(git(bare("bad1"), "rev-parse", "patchbay/edge")).toBe(foreign);
    const forced = await run(["campaign", "publish", "edge", "--force"]);
    expect(forced.code).toBe(1); // still the read-only one
    expect((await status("edge")).changesets[1]).toMatchObject({ state: "draft" });
    expect(git(bare("bad1"), "rev-parse", "patchbay/edge")).not.toBe(foreign);
    await probe.quit();
    expect(github.violations).toEqual([]);
  }, 1_200_000);

  it("SSH and GitLab: a plain remote over SSH gets the branch only, GitLab a draft MR (API) or one made by the push (no token); the tracker on the queue follows them to the end", async () => {
    const file = campaignFile("wide", [`${ssh.login}:${bare("s1")}`, url("g1", glServer), url("g2", glPlain)]);
    const ran = await run(["campaign", "run", file, "--out", join(dir, "out-wide")], 600_000);
    expect(ran.code, ran.stderr).toBe(0);
    const fast = { ...cliEnv, PATCHBAY_TRACK_EVERY_MS: "300" };
    const pub = await cli(["campaign", "publish", "wide"], fast, { timeoutMs: 300_000 });
    outputs.push(pub.stdout, pub.stderr);
    expect(pub.code, pub.stderr).toBe(0);
    const st = await status("wide");
    expect(st.changesets.map((c) => [c.state, c.forge, c.number ?? null])).toEqual([
      ["open", "git", null],
      ["draft", "gitlab", 1],
      ["open", "gitlab", null],
    ]);
    for (const n of ["s1", "g1", "g2"])
      expect(git(bare(n), "diff", "main", "patchbay/wide")).toMatch(/-value = bug\n\+value = fixed/);
    expect(gitlab.allMrs("acme/g1")).toHaveLength(1);
    expect(gitlab.allMrs("acme/g1")[0]).toMatchObject({
      title: "Draft: Fix the bug in g1",
      source: "patchbay/wide",
      target: "main",
    });
    expect(readFileSync(join(dir, "push-options.txt"), "utf8").split("\n")).toEqual([
      "merge_request.create",
      "merge_request.target=main",
      "merge_request.title=Draft: Fix the bug in g2",
      "",
    ]);
    expect(gitlab.violations).toEqual([]);

    // The tracker (on the publishing host) takes the scheduled track jobs: the MR merged, the plain
    // remotes' branches deleted, and once nothing is open the schedule goes.
    const tracker = spawn(process.execPath, [BIN, "campaign", "tracker"], {
      env: { ...process.env, ...fast },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let tlog = "";
    tracker.stdout.on("data", (d) => (tlog += d));
    tracker.stderr.on("data", (d) => (tlog += d));
    const exited = new Promise<number | null>((r) => tracker.once("exit", (code) => r(code)));
    gitlab.merge("acme/g1", 1);
    git(bare("s1"), "update-ref", "-d", "refs/heads/patchbay/wide");
    git(bare("g2"), "update-ref", "-d", "refs/heads/patchbay/wide");
    const tq = new Queue(`${QUEUE}-campaigns`, { connection: { url: redis.url } });
    while ((await tq.getJobSchedulers()).some((s) => s.key === "track:wide")) {
      if (tracker.exitCode !== null) throw new Error(`the tracker exited: ${tlog}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await tq.close();
    tracker.kill("SIGTERM");
    expect(await exited).toBe(0);
    outputs.push(tlog);
    expect(tlog).toMatch(/campaign wide: 3 refreshed, 0 open/);
    expect((await status("wide")).changesets.map((c) => c.state)).toEqual(["closed", "merged", "closed"]);
  }, 900_000);

  it("the tokens are in no file, Redis key, event, log line or output", async () => {
    const leaks = (s: string) => [TOKEN, READ_TOKEN, GL_TOKEN, PUSHER.password].filter((t) => s.includes(t));
    const probe = new Redis(redis.url);
    const dump: string[] = [];
    for (const key of await probe.keys("*")) {
      const type = await probe.type(key);
      dump.push(key);
      if (type === "string") dump.push((await probe.getBuffer(key))?.toString("latin1") ?? "");
      else if (type === "hash") dump.push(JSON.stringify(await probe.hgetall(key)));
      else if (type === "list") dump.push(JSON.stringify(await probe.lrange(key, 0, -1)));
      else if (type === "set") dump.push(JSON.stringify(await probe.smembers(key)));
      else if (type === "zset") dump.push(JSON.stringify(await probe.zrange(key, "0", "-1")));
      else if (type === "stream") dump.push(JSON.stringify(await probe.xrange(key, "-", "+")));
    }
    await probe.quit();
    expect(leaks(dump.join("\n"))).toEqual([]);
    expect(leaks(outputs.join("\n") + workers.map((w) => w.log()).join("\n"))).toEqual([]);
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(d)) {
        const p = join(d, e);
        const s = statSync(p, { throwIfNoEntry: false });
        if (s?.isDirectory()) walk(p);
        else if (s?.isFile()) files.push(p);
      }
    };
    for (const d of [join(dir, "cache"), join(dir, "out"), join(dir, "out-edge"), join(dir, "out-wide")]) walk(d);
    expect(files.length).toBeGreaterThan(20);
    expect(files.filter((f) => leaks(readFileSync(f, "latin1")).length)).toEqual([]);
    // HOME holds the user's own git credentials (the store helper's file, theirs), and no token of ours.
    const home: string[] = [];
    files.length = 0;
    walk(join(dir, "home"));
    home.push(...files);
    expect(
      home.filter((f) => [TOKEN, READ_TOKEN, GL_TOKEN].some((t) => readFileSync(f, "latin1").includes(t))),
    ).toEqual([]);
  });
});
