// The GitLab forge client (src/campaign/forge/gitlab.ts: gitbeaker) against the stand-in of
// support/gitlab-fake.ts, which checks each request against zod schemas written from GitLab's REST
// docs (GitLab's OpenAPI description is not on this machine) and its own answers; both lists stay
// empty after each test. No Docker, no Redis.
import { inspect } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ForgeHost } from "../../src/core/config/forges.js";
import { ForgeError } from "../../src/campaign/forge/forge-error.js";
import { GitLabForge } from "../../src/campaign/forge/gitlab.js";
import { GitLabFake } from "../support/gitlab-fake.js";

const WRITER = `glpat-writer${process.pid}Hq5Rt1`;
const READER = `glpat-reader${process.pid}Mz2Xc6`;
const SHA = (c: string) => c.repeat(40);

let fake: GitLabFake;
let host: ForgeHost;
let seq = 0;

beforeAll(async () => {
  fake = await new GitLabFake().start();
  host = { host: "gitlab.test", kind: "gitlab", apiUrl: fake.url };
});
afterAll(() => fake.stop());
afterEach(() => {
  expect(fake.violations).toEqual([]);
  expect(fake.responseViolations).toEqual([]);
});

/** A fresh project in a subgroup (group/sub/name), with main and a pushed head branch. */
function freshProject() {
  const path = `acme/platform/svc${++seq}`;
  fake.addProject(path, { main: SHA("a"), "patchbay/camp": SHA("b") });
  fake.grant(WRITER, path, "write");
  fake.grant(READER, path, "read");
  return { host: "gitlab.test", path };
}
const forge = (token = WRITER) => new GitLabForge(host, token);
const sent = (method: string) => fake.requests.filter((r) => r.method === method);
const draft = { head: "patchbay/camp", base: "main", title: "Bump the logger", body: "The change.", draft: true };

describe("merge requests", () => {
  it("creates a draft merge request (GitLab's Draft: prefix) at the URL-encoded project path, which findOpen finds", async () => {
    const repo = freshProject();
    const ref = await forge().create(repo, draft);
    expect(ref).toMatchObject({
      number: 1,
      state: "draft",
      headSha: SHA("b"),
      url: `${fake.url}/${repo.path}/-/merge_requests/1`,
    });
    expect(fake.mr(repo.path, 1)).toMatchObject({
      title: "Draft: Bump the logger",
      description: "The change.",
      source: "patchbay/camp",
      target: "main",
    });
    expect(sent("POST").at(-1)!.path).toBe(`/api/v4/projects/${encodeURIComponent(repo.path)}/merge_requests`);
    expect(await forge().findOpen(repo, "patchbay/camp", "main")).toEqual(ref);
    expect(await forge().findOpen(repo, "patchbay/other", "main")).toBeUndefined();
    const ready = await forge().create(freshProject(), { ...draft, draft: false });
    expect(ready.state).toBe("open");
  });

  it("update sends nothing when nothing differs, keeps the draft prefix, and sends only what differs", async () => {
    const repo = freshProject();
    await forge().create(repo, draft);
    const puts = () => sent("PUT").filter((r) => r.path.includes(encodeURIComponent(repo.path)));
    await forge().update(repo, 1, { title: draft.title, body: draft.body });
    expect(puts()).toEqual([]);
    await forge().update(repo, 1, { title: "Bump the logger, v2", body: draft.body });
    expect(puts().map((r) => r.body)).toEqual([{ title: "Draft: Bump the logger, v2" }]);
    expect(fake.mr(repo.path, 1).title).toBe("Draft: Bump the logger, v2");
  });

  it("close closes it (state_event close)", async () => {
    const repo = freshProject();
    await forge().create(repo, draft);
    await forge().close(repo, 1);
    expect(sent("PUT").at(-1)!.body).toEqual({ state_event: "close" });
    expect(fake.mr(repo.path, 1).state).toBe("closed");
    expect(await forge().findOpen(repo, "patchbay/camp", "main")).toBeUndefined();
  });
});

describe("status", () => {
  it("maps opened (draft or not), locked, merged and closed", async () => {
    const repo = freshProject();
    await forge().create(repo, draft);
    const state = async () => (await forge().status(repo, 1)).state;
    expect(await state()).toBe("draft");
    fake.markReady(repo.path, 1);
    expect(await state()).toBe("open");
    fake.lock(repo.path, 1);
    expect(await state()).toBe("open");
    fake.merge(repo.path, 1);
    expect(await state()).toBe("merged");
    const other = freshProject();
    await forge().create(other, draft);
    fake.close(other.path, 1);
    expect((await forge().status(other, 1)).state).toBe("closed");
  });

  it("reads checks from the head pipeline", async () => {
    const repo = freshProject();
    await forge().create(repo, draft);
    const checks = async () => (await forge().status(repo, 1)).checks;
    expect(await checks()).toBe("none");
    for (const [pipeline, want] of [
      ["created", "pending"],
      ["running", "pending"],
      ["manual", "pending"],
      ["success", "passing"],
      ["failed", "failing"],
      ["canceled", "failing"],
      ["skipped", "none"],
    ] as const) {
      fake.setPipeline(repo.path, 1, pipeline);
      expect([pipeline, await checks()]).toEqual([pipeline, want]);
    }
  });

  it("reads the review from approvals and reviewers", async () => {
    const repo = freshProject();
    await forge().create(repo, draft);
    const review = async () => (await forge().status(repo, 1)).review;
    expect(await review()).toBe("none");
    fake.setReviewers(repo.path, 1, ["carol"]);
    expect(await review()).toBe("review_required");
    fake.setApprovals(repo.path, 1, 2, ["carol"]);
    expect(await review()).toBe("review_required");
    fake.setApprovals(repo.path, 1, 2, ["carol", "dave"]);
    expect(await review()).toBe("approved");
    fake.setReviewers(repo.path, 1, []);
    fake.setApprovals(repo.path, 1, 0, ["erin"]);
    expect(await review()).toBe("approved");
  });
});

describe("errors and rate limits", () => {
  const shown = (e: unknown) =>
    [String((e as Error).message), String((e as Error).stack), inspect(e, { depth: 10 }), JSON.stringify(e)].join("\n");

  it("a token that can only read cannot create: a ForgeError naming host, project and rights, without the token", async () => {
    const repo = freshProject();
    const e = await forge(READER)
      .create(repo, draft)
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(e).toBeInstanceOf(ForgeError);
    expect((e as ForgeError).status).toBe(403);
    expect((e as ForgeError).message).toBe(
      `GitLab gitlab.test: creating a merge request in ${repo.path} failed: the token for gitlab.test cannot write merge requests to ${repo.path} (403): it needs the "api" scope and at least the Developer role on ${repo.path}`,
    );
    expect(shown(e)).not.toContain(READER);
    const unknown = await forge(`${WRITER}x`)
      .findOpen(repo, "a", "main")
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect((unknown as ForgeError).message).toContain(
      "the token for gitlab.test is invalid or expired (401); set a valid one in PATCHBAY_FORGE_TOKEN_GITLAB_TEST",
    );
    expect(shown(unknown)).not.toContain(WRITER);
    expect(fake.allMrs(repo.path)).toEqual([]);
  });

  it("a second merge request for the same branch: GitLab's 409, said", async () => {
    const repo = freshProject();
    await forge().create(repo, draft);
    const e = (await forge()
      .create(repo, draft)
      .catch((err: unknown) => err)) as ForgeError;
    expect(e.status).toBe(409);
    expect(e.message).toContain(
      "gitlab.test refused it (409): Another open merge request already exists for this source branch: !1",
    );
  });

  it("a 429 is retried by gitbeaker and then succeeds; past its retries, a ForgeError that says so", async () => {
    const repo = freshProject();
    const before = fake.requests.length;
    fake.rateLimitNext(2);
    const ref = await forge().create(repo, draft);
    expect(ref.number).toBe(1);
    expect(fake.requests.slice(before).map((r) => r.status)).toEqual([429, 429, 201]);
    const mid = fake.requests.length;
    fake.rateLimitNext(11);
    const e = (await forge()
      .findOpen(repo, "patchbay/camp", "main")
      .catch((err: unknown) => err)) as ForgeError;
    expect(e).toBeInstanceOf(ForgeError);
    expect(fake.requests.slice(mid).map((r) => r.status)).toEqual(Array(10).fill(429));
    expect(e.message).toContain("gitlab.test rate limits this token (429) and the retries are spent; try again later");
    fake.rateLimitNext(0);
  });
});

describe("the stand-in's validator", () => {
  it("records a request GitLab's docs rule out: a missing required field, a wrong type, a raw slash in the project path, a bad state", async () => {
    const repo = freshProject();
    const enc = encodeURIComponent(repo.path);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${fake.url}/api/v4${path}`, {
        method,
        headers: { "private-token": WRITER, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    expect(
      (await call("POST", `/projects/${enc}/merge_requests`, { source_branch: "patchbay/camp", title: "t" })).status,
    ).toBe(400);
    expect(
      (
        await call("POST", `/projects/${enc}/merge_requests`, {
          source_branch: "patchbay/camp",
          target_branch: "main",
          title: 5,
        })
      ).status,
    ).toBe(400);
    expect((await call("GET", `/projects/${repo.path}/merge_requests`)).status).toBe(400);
    expect((await call("GET", `/projects/${enc}/merge_requests?state=open`)).status).toBe(400);
    expect((await call("PUT", `/projects/${enc}/merge_requests/1`, {})).status).toBe(400);
    expect(fake.violations.map((v) => v.replace(/^\S+ \S+: /, ""))).toEqual([
      "body.target_branch: Invalid input: expected string, received undefined",
      "body.title: Invalid input: expected string, received number",
      "no merge-request endpoint of GitLab's docs has this method and path",
      'query.state: Invalid option: expected one of "opened"|"closed"|"locked"|"merged"|"all"',
      "body: at least one parameter is required",
    ]);
    expect(fake.allMrs(repo.path)).toEqual([]);
    fake.violations.length = 0;
  });
});
