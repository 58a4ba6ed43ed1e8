// The GitHub forge client (src/campaign/forge/github.ts: Octokit with its throttling and retry
// plugins) against the stand-in of support/github-fake.ts, which checks every request against
// GitHub's published OpenAPI description and its own answers too: both lists stay empty after
// each test. No Docker, no Redis.
import { inspect } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { ForgeHost } from "../../src/core/config/forges.js";
import { ForgeError } from "../../src/campaign/forge/forge-error.js";
import type { ForgeWait } from "../../src/campaign/forge/forge.js";
import { GITHUB_BODY_MAX, GitHubForge } from "../../src/campaign/forge/github.js";
import { GitHubFake } from "../support/github-fake.js";

const WRITER = `ghp_writer${process.pid}Qx7Lm2`;
const READER = `ghp_reader${process.pid}Vb9Tn4`;
const STRANGER = `ghp_stranger${process.pid}Kd3Wp8`;
const SHA = (c: string) => c.repeat(40);

let fake: GitHubFake;
let host: ForgeHost;
let seq = 0;

beforeAll(async () => {
  fake = await new GitHubFake().start();
  host = { host: "github.test", kind: "github", apiUrl: fake.url };
});
afterAll(() => fake.stop());
afterEach(() => {
  expect(fake.violations).toEqual([]);
  expect(fake.responseViolations).toEqual([]);
  expect(fake.unserved).toEqual([]);
});

/** A fresh repo with a main branch and a pushed head branch, writable by WRITER and readable by READER. */
function freshRepo(head = "patchbay/camp", sha = SHA("b")) {
  const path = `acme/svc${++seq}`;
  fake.addRepo(path, { main: SHA("a"), [head]: sha });
  fake.grant(WRITER, path, "write");
  fake.grant(READER, path, "read");
  return { host: "github.test", path };
}
const forge = (token = WRITER, onWait?: (w: ForgeWait) => void, maxRetries?: number) =>
  new GitHubForge(host, token, { onWait, maxRetries });
const sent = (path: string, method: string) =>
  fake.requests.filter((r) => r.method === method && r.path.startsWith(`/repos/${path}/`));
const draft = { head: "patchbay/camp", base: "main", title: "Bump the logger", body: "The change.", draft: true };

describe("pull requests", () => {
  it("creates a draft pull request, which findOpen finds by head and base", async () => {
    const repo = freshRepo();
    const ref = await forge().create(repo, draft);
    expect(ref).toMatchObject({ number: 1, state: "draft", headSha: SHA("b"), url: `${fake.url}/${repo.path}/pull/1` });
    expect(fake.pull(repo.path, 1)).toMatchObject({
      draft: true,
      title: "Bump the logger",
      body: "The change.",
      head: { ref: "patchbay/camp" },
      base: { ref: "main" },
    });
    expect(await forge().findOpen(repo, "patchbay/camp", "main")).toEqual(ref);
    expect(await forge().findOpen(repo, "patchbay/other", "main")).toBeUndefined();
    expect(await forge().findOpen(repo, "patchbay/camp", "develop")).toBeUndefined();
    const ready = await forge().create(freshRepo(), { ...draft, draft: false });
    expect(ready.state).toBe("open");
  });

  it("update sends nothing when nothing differs, and only what differs otherwise", async () => {
    const repo = freshRepo();
    await forge().create(repo, draft);
    await forge().update(repo, 1, { title: draft.title, body: draft.body });
    expect(sent(repo.path, "PATCH")).toEqual([]);
    await forge().update(repo, 1, { title: draft.title, body: "A new body." });
    expect(sent(repo.path, "PATCH").map((r) => r.body)).toEqual([{ body: "A new body." }]);
    expect(fake.pull(repo.path, 1)).toMatchObject({ title: draft.title, body: "A new body." });
  });

  it("cuts a body over GitHub's 65,536 characters with a note, and a re-publish of it sends nothing", async () => {
    const repo = freshRepo();
    const long = "x".repeat(GITHUB_BODY_MAX - 1) + "😀".repeat(100);
    await forge().create(repo, { ...draft, body: long });
    const body = fake.pull(repo.path, 1).body!;
    expect(body.length).toBeLessThanOrEqual(GITHUB_BODY_MAX);
    expect(body).toMatch(/cut by patchbay: the body was 65,735 characters; the forge takes 65,536\)$/);
    await forge().update(repo, 1, { title: draft.title, body: long });
    expect(sent(repo.path, "PATCH")).toEqual([]);
  });

  it("close closes it", async () => {
    const repo = freshRepo();
    await forge().create(repo, draft);
    await forge().close(repo, 1);
    expect(fake.pull(repo.path, 1).state).toBe("closed");
    expect((await forge().status(repo, 1)).state).toBe("closed");
    expect(await forge().findOpen(repo, "patchbay/camp", "main")).toBeUndefined();
  });
});

describe("status", () => {
  it("maps draft, open, merged and closed", async () => {
    const repo = freshRepo();
    await forge().create(repo, draft);
    expect((await forge().status(repo, 1)).state).toBe("draft");
    fake.markReady(repo.path, 1);
    expect((await forge().status(repo, 1)).state).toBe("open");
    fake.merge(repo.path, 1);
    expect((await forge().status(repo, 1)).state).toBe("merged");
    const other = freshRepo();
    await forge().create(other, draft);
    fake.close(other.path, 1);
    expect(await forge().status(other, 1)).toMatchObject({ state: "closed", number: 1, headSha: SHA("b") });
  });

  it("reads checks from check runs of the head commit", async () => {
    const repo = freshRepo();
    await forge().create(repo, draft);
    const checks = async () => (await forge().status(repo, 1)).checks;
    expect(await checks()).toBe("none");
    fake.setChecks(repo.path, SHA("b"), "pending");
    expect(await checks()).toBe("pending");
    fake.setChecks(repo.path, SHA("b"), "passing");
    expect(await checks()).toBe("passing");
    fake.setChecks(repo.path, SHA("b"), "failing", "lint");
    expect(await checks()).toBe("failing");
    fake.setChecks(repo.path, SHA("c"), "failing"); // another commit's: not counted
    fake.setChecks(repo.path, SHA("b"), "passing", "lint");
    expect(await checks()).toBe("passing");
  });

  it("reads checks from commit statuses, and from both together", async () => {
    const repo = freshRepo();
    await forge().create(repo, draft);
    const checks = async () => (await forge().status(repo, 1)).checks;
    fake.setStatus(repo.path, SHA("b"), "pending");
    expect(await checks()).toBe("pending");
    fake.setStatus(repo.path, SHA("b"), "success");
    expect(await checks()).toBe("passing");
    fake.setStatus(repo.path, SHA("b"), "failure");
    expect(await checks()).toBe("failing");
    fake.setStatus(repo.path, SHA("b"), "error");
    expect(await checks()).toBe("failing");
    fake.setStatus(repo.path, SHA("b"), "success");
    fake.setChecks(repo.path, SHA("b"), "pending");
    expect(await checks()).toBe("pending");
    fake.setChecks(repo.path, SHA("b"), "passing");
    fake.setStatus(repo.path, SHA("b"), "failure", "ci/other");
    expect(await checks()).toBe("failing");
  });

  it("reads the review from each reviewer's latest review and the requested reviewers", async () => {
    const repo = freshRepo();
    await forge().create(repo, draft);
    const review = async () => (await forge().status(repo, 1)).review;
    expect(await review()).toBe("none");
    fake.requestReviewers(repo.path, 1, ["carol"]);
    expect(await review()).toBe("review_required");
    fake.addReview(repo.path, 1, "carol", "COMMENTED");
    expect(await review()).toBe("review_required");
    fake.addReview(repo.path, 1, "carol", "APPROVED");
    expect(await review()).toBe("approved");
    fake.addReview(repo.path, 1, "carol", "COMMENTED");
    expect(await review()).toBe("approved");
    fake.addReview(repo.path, 1, "dave", "CHANGES_REQUESTED");
    expect(await review()).toBe("changes_requested");
    fake.addReview(repo.path, 1, "dave", "APPROVED");
    expect(await review()).toBe("approved");
    fake.addReview(repo.path, 1, "carol", "DISMISSED");
    fake.addReview(repo.path, 1, "dave", "DISMISSED");
    expect(await review()).toBe("review_required");
  });
});

describe("errors", () => {
  /** Everything an error shows: message, stack, inspect and JSON. */
  const shown = (e: unknown) =>
    [String((e as Error).message), String((e as Error).stack), inspect(e, { depth: 10 }), JSON.stringify(e)].join("\n");
  async function failure(p: Promise<unknown>): Promise<ForgeError> {
    const logged: unknown[] = [];
    const spies = (["log", "warn", "error", "info", "debug"] as const).map((m) =>
      vi.spyOn(console, m).mockImplementation((...a) => void logged.push(a)),
    );
    const e = await p.then(
      () => undefined,
      (err: unknown) => err,
    );
    spies.forEach((s) => s.mockRestore());
    expect(e).toBeInstanceOf(ForgeError);
    for (const t of [WRITER, READER, STRANGER]) {
      expect(shown(e)).not.toContain(t);
      expect(inspect(logged)).not.toContain(t);
    }
    return e as ForgeError;
  }

  it("a token that can only read cannot create: a ForgeError naming the host, the repo and the rights it needs, without the token", async () => {
    const repo = freshRepo();
    const e = await failure(forge(READER).create(repo, draft));
    expect(e.status).toBe(403);
    expect(e.kind).toBe("infra");
    expect(e.message).toBe(
      `GitHub github.test: creating a pull request in ${repo.path} failed: the token for github.test cannot write pull requests to ${repo.path} (403): it needs "Pull requests: read and write" (a fine-grained token) or the "repo" scope (a classic token) on ${repo.path}`,
    );
    expect(fake.allPulls(repo.path)).toEqual([]);
  });

  it("a token that cannot see the repo (404 on a write), an unknown token (401), no token, a pull that is not there", async () => {
    const repo = freshRepo();
    fake.grant(STRANGER, "acme/elsewhere", "write");
    const hidden = await failure(forge(STRANGER).create(repo, draft));
    expect(hidden.status).toBe(404);
    expect(hidden.message).toContain(`the token for github.test cannot write pull requests to ${repo.path} (404)`);
    const unknown = await failure(forge(`${WRITER}x`).findOpen(repo, "a", "main"));
    expect(unknown.status).toBe(401);
    expect(unknown.message).toBe(
      `GitHub github.test: finding the open pull request in ${repo.path} failed: the token for github.test is invalid or expired (401); set a valid one in PATCHBAY_FORGE_TOKEN_GITHUB_TEST`,
    );
    expect(unknown.message).not.toContain(WRITER);
    const none = await failure(new GitHubForge(host, undefined).close(repo, 1));
    expect(none.message).toContain(
      "no token was given for github.test (401); set one in PATCHBAY_FORGE_TOKEN_GITHUB_TEST",
    );
    const missing = await failure(forge().status(repo, 7));
    expect(missing.message).toContain(
      `reading pull request #7 in ${repo.path} failed: ${repo.path} or the pull request is not on github.test, or the token for github.test cannot see it (404)`,
    );
  });

  it("a second pull request for the same head: GitHub's refusal, said", async () => {
    const repo = freshRepo();
    await forge().create(repo, draft);
    const e = await failure(forge().create(repo, draft));
    expect(e.status).toBe(422);
    expect(e.message).toContain("github.test refused it (422): Validation Failed");
  });
});

describe("rate limits", () => {
  it("a secondary rate limit (403, retry-after: 1) is waited out and retried, each wait reported", async () => {
    const repo = freshRepo();
    const waits: ForgeWait[] = [];
    fake.rateLimitNext(2, "secondary");
    const ref = await forge(WRITER, (w) => waits.push(w)).create(repo, draft);
    expect(ref.number).toBe(1);
    expect(sent(repo.path, "POST").map((r) => r.status)).toEqual([403, 403, 201]);
    expect(waits).toEqual([
      { host: "github.test", reason: "secondary rate limit", seconds: 1, attempt: 1 },
      { host: "github.test", reason: "secondary rate limit", seconds: 1, attempt: 2 },
    ]);
    expect(fake.allPulls(repo.path)).toHaveLength(1);
  });

  it("a 429 with the quota spent is waited out until its reset and retried", async () => {
    const repo = freshRepo();
    const waits: ForgeWait[] = [];
    fake.rateLimitNext(1, "429");
    expect(await forge(WRITER, (w) => waits.push(w)).findOpen(repo, "patchbay/camp", "main")).toBeUndefined();
    expect(sent(repo.path, "GET").map((r) => r.status)).toEqual([429, 200]);
    expect(waits.map((w) => [w.reason, w.attempt])).toEqual([["rate limit", 1]]);
  });

  it("retries are bounded: past them, a ForgeError that says so", async () => {
    const repo = freshRepo();
    fake.rateLimitNext(3, "secondary");
    const e = (await forge(WRITER, undefined, 2)
      .create(repo, draft)
      .catch((err: unknown) => err)) as ForgeError;
    expect(e).toBeInstanceOf(ForgeError);
    expect(e.message).toContain("github.test rate limits this token (403) and the retries are spent; try again later");
    expect(sent(repo.path, "POST")).toHaveLength(3);
    fake.rateLimitNext(0, "secondary");
  });
});

describe("the stand-in's validator", () => {
  it("records a request GitHub's description rejects: a wrong body type, a missing required field, a bad query value, an unknown path", async () => {
    const repo = freshRepo();
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${fake.url}${path}`, {
        method,
        headers: { authorization: `token ${WRITER}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    expect(
      (
        await call("POST", `/repos/${repo.path}/pulls`, {
          head: "patchbay/camp",
          base: "main",
          title: "t",
          draft: "yes",
        })
      ).status,
    ).toBe(422);
    expect((await call("POST", `/repos/${repo.path}/pulls`, { title: "t", base: "main" })).status).toBe(422);
    expect((await call("GET", `/repos/${repo.path}/pulls?state=opened`)).status).toBe(422);
    expect((await call("GET", `/repos/${repo.path}/pulls/one`)).status).toBe(422);
    expect((await call("GET", `/repos/${repo.path}/merge_requests`)).status).toBe(404);
    expect(fake.violations).toEqual([
      "POST /repos/{owner}/{repo}/pulls: body: /draft must be boolean",
      "POST /repos/{owner}/{repo}/pulls: body: (root) must have required property 'head'",
      'GET /repos/{owner}/{repo}/pulls: query parameter state: (root) must be equal to one of the allowed values ["open","closed","all"]',
      "GET /repos/{owner}/{repo}/pulls/{pull_number}: path parameter pull_number: (root) must be integer",
      `GET /repos/${repo.path}/merge_requests: no path of GitHub's description matches`,
    ]);
    expect(fake.allPulls(repo.path)).toEqual([]);
    fake.violations.length = 0;
  });
});
