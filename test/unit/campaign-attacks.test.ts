// Campaigns attacked as a hostile repository, a hostile model, a hostile forge and a hostile
// campaign file would: where a forge token may go, what the model's text may do in a pull request,
// a commit or a terminal, which branch names a campaign may push. Pure where it can be; else
// against local servers (a redirecting API, a catcher on another origin). No Docker, no Redis.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import { forgeOf, type PublishContext } from "../../src/campaign/context.js";
import { GitHubForge } from "../../src/campaign/forge/github.js";
import { GitLabForge } from "../../src/campaign/forge/gitlab.js";
import { outcomeValues } from "../../src/campaign/change-text.js";
import { publishSettings, type PublishSettings } from "../../src/campaign/publish-settings.js";
import { render } from "../../src/campaign/template.js";
import { CampaignFileError, parseCampaign } from "../../src/campaign/file.js";
import { emptyUsage, type JobResult } from "../../src/core/spec/spec.js";
import { planPublish, type PublishState } from "../../src/campaign/plan.js";

const GH = "ghp_attackTOKEN0123456789abcdefABCDEF";
const GL = "glpat-attackTOKEN0123456789abc";

describe("a forge token goes to its own host, over the forge's own scheme, and nowhere else", () => {
  const config = loadConfig({
    GITHUB_TOKEN: GH,
    GITLAB_TOKEN: GL,
    PATCHBAY_FORGES: "127.0.0.1:9999=github@http://127.0.0.1:9999",
    PATCHBAY_FORGE_TOKEN_127_0_0_1_9999: "local-token-0123456789",
  });
  const ctx = { config, forges: new Map() } as unknown as PublishContext;

  it("gives no token to git for a URL in the clear (http://github.com), nor one whose host git reads otherwise than the URL parser", () => {
    for (const url of [
      "http://github.com/acme/api.git",
      "http://gitlab.com/acme/api.git",
      "https://gitlab.com\\.evil.example/acme/api",
      "https://github%2Ecom/acme/api",
      "https://gitlab.com:8443/acme/api",
    ]) {
      expect(forgeOf(ctx, url).credential, url).toBeUndefined();
    }
  });

  it("still gives it where it belongs: https on the forge's host (any case, the default port), http where the forge's own API is http", () => {
    for (const url of [
      "https://github.com/acme/api.git",
      "https://GitHub.com/acme/api",
      "https://github.com:443/acme/api",
      "https://gitlab.com/acme/sub/api.git",
    ]) {
      expect(forgeOf(ctx, url).credential?.password, url).toBe(url.includes("gitlab") ? GL : GH);
    }
    expect(forgeOf(ctx, "http://127.0.0.1:9999/acme/api.git").credential?.password).toBe("local-token-0123456789");
    expect(forgeOf(ctx, "git@github.com:acme/api.git").credential).toBeUndefined(); // ssh: the user's keys
  });
});

describe("a forge's API that redirects elsewhere gets no token there", () => {
  let catcher: http.Server, redirector: http.Server;
  const caught: http.IncomingHttpHeaders[] = [];
  let apiUrl = "";
  const listen = async (s: http.Server) => (
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r)),
    (s.address() as AddressInfo).port
  );

  beforeAll(async () => {
    catcher = http.createServer(
      (req, res) => (
        caught.push(req.headers),
        res.writeHead(200, { "content-type": "application/json" }),
        res.end("[]")
      ),
    );
    const other = await listen(catcher);
    // Another origin (localhost, not 127.0.0.1): what an open redirect on a forge would send to.
    redirector = http.createServer(
      (req, res) => (res.writeHead(302, { location: `http://localhost:${other}${req.url}` }), res.end()),
    );
    apiUrl = `http://127.0.0.1:${await listen(redirector)}`;
  });
  afterAll(() => (catcher.close(), redirector.close()));

  it.each([
    ["GitHub", () => new GitHubForge({ host: "gh.test", kind: "github", apiUrl }, GH), GH],
    ["GitLab", () => new GitLabForge({ host: "gl.test", kind: "gitlab", apiUrl }, GL), GL],
  ] as const)("%s: the token is in no header the other origin sees", async (_name, make, token) => {
    caught.length = 0;
    await make()
      .findOpen({ host: "x", path: "acme/api" }, "patchbay/c", "main")
      .catch(() => undefined);
    expect(JSON.stringify(caught)).not.toContain(token);
  });
});

describe("a forge's answer is read up to a bound", () => {
  let api: http.Server;
  let apiUrl = "";
  const big = JSON.stringify(Array.from({ length: 3000 }, (_, i) => ({ number: i + 1, title: "x".repeat(500) }))); // ~1.6 MB
  const asked: string[] = [];
  beforeAll(async () => {
    api = http.createServer((req, res) => {
      asked.push(req.url!);
      // A list that says another page follows: page 2 is refused, so a client that follows it fails.
      if (req.url!.includes("paged")) {
        if (/[?&]page=2\b/.test(req.url!))
          return void (
            res.writeHead(404, { "content-type": "application/json" }),
            res.end('{"message":"404 Not found"}')
          );
        res.writeHead(200, {
          "content-type": "application/json",
          link: `<${apiUrl}${req.url!.split("?")[0]}?page=2&per_page=100>; rel="next"`,
        });
        return void res.end("[]");
      }
      // /declared: says its length (refused before a byte is read); else chunked, counted as it arrives.
      // /bad-gateway: the same answer as a 502, which a GitLab client retries.
      res.writeHead(req.url!.includes("bad-gateway") ? 502 : 200, {
        "content-type": "application/json",
        ...(req.url!.includes("declared") ? { "content-length": Buffer.byteLength(big) } : {}),
      });
      res.end(big);
    });
    await new Promise<void>((r) => api.listen(0, "127.0.0.1", r));
    apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  });
  afterAll(() => api.close());

  it.each([
    ["streamed", "acme/api"],
    ["declared", "acme/declared"],
  ])(
    "GitHub: an answer over the bound (%s) fails the call with an error naming the bound, not the publishing host's memory",
    async (_how, path) => {
      const forge = new GitHubForge({ host: "gh.test", kind: "github", apiUrl }, GH, { maxAnswerBytes: 1_000_000 });
      await expect(forge.findOpen({ host: "gh.test", path }, "patchbay/c", "main")).rejects.toThrow(
        /^GitHub gh\.test: finding the open pull request in acme\/(api|declared) failed: the answer is not what the API documents \(the answer is over 1,000,000 bytes, the most patchbay reads of one forge answer\)$/,
      );
      // Under the bound the same answer is read (and then judged by its shape).
      const under = await new GitHubForge({ host: "gh.test", kind: "github", apiUrl }, GH, {
        maxAnswerBytes: 4_000_000,
      })
        .findOpen({ host: "gh.test", path }, "patchbay/c", "main")
        .catch((e: Error) => e.message);
      expect(under).toMatch(/not what the API documents \(: Too big/);
    },
  );

  it.each([
    ["streamed", "acme/api"],
    ["declared", "acme/declared"],
    ["a 502", "acme/bad-gateway"],
  ])(
    "GitLab: an answer over the bound (%s) fails the call with an error naming the bound, asked once",
    async (how, path) => {
      const gitlab = (maxAnswerBytes: number) =>
        new GitLabForge({ host: "gl.test", kind: "gitlab", apiUrl }, GL, { maxAnswerBytes });
      asked.length = 0;
      await expect(gitlab(1_000_000).findOpen({ host: "gl.test", path }, "patchbay/c", "main")).rejects.toThrow(
        /^GitLab gl\.test: finding the open merge request in acme\/(api|declared|bad-gateway) failed: the answer is not what the API documents \(the answer is over 1,000,000 bytes, the most patchbay reads of one forge answer\)$/,
      );
      expect(asked).toHaveLength(1); // not retried: another try would only read as much again
      // Under the bound the same answer is read: judged by its shape, or (a 502) retried ten times.
      asked.length = 0;
      const under = await gitlab(4_000_000)
        .findOpen({ host: "gl.test", path }, "patchbay/c", "main")
        .catch((e: Error) => e.message);
      if (how === "a 502") expect([under, asked.length]).toEqual([expect.stringContaining("gl.test answered 502"), 10]);
      else expect(under).toMatch(/not what the API documents \(: Too big/);
    },
  );

  it("GitLab: a list's next page is not followed, so no call reads more than one answer (bar retries)", async () => {
    const gitlab = new GitLabForge({ host: "gl.test", kind: "gitlab", apiUrl }, GL);
    asked.length = 0;
    expect(await gitlab.findOpen({ host: "gl.test", path: "acme/paged" }, "patchbay/c", "main")).toBeUndefined();
    // A list where one object was asked for (the merge request an update reads first) pages no further either.
    await expect(gitlab.update({ host: "gl.test", path: "acme/paged" }, 1, { title: "t", body: "b" })).rejects.toThrow(
      /not what the API documents \(: Invalid input: expected object, received array/,
    );
    expect(asked.map((u) => u.replace(/\?.*/, ""))).toEqual([
      "/api/v4/projects/acme%2Fpaged/merge_requests",
      "/api/v4/projects/acme%2Fpaged/merge_requests/1",
    ]);
  });
});

describe("the model's text in a pull request, a commit and a title is inert", () => {
  const def = { name: "camp", createdAt: 0, publish: publishSettings({}, "camp") as PublishSettings, repos: [] };
  const repo = { line: 1, git: "https://github.com/acme/api.git", vars: {} };
  const values = (summary: string, diffstat = " a.txt | 1 +") =>
    outcomeValues(
      def,
      repo,
      "camp-L1",
      { summary, diffstat, costUsd: 0.1, verified: true, verify: { exitCode: 0 } } as unknown as JobResult,
      { task: "Fix it.", verify: "npm test" },
    );

  it("drops control characters (a NUL failed the commit; escapes reached `git log` on a terminal), keeping lines and tabs", () => {
    const v = values("Done\0 \x1b]8;;http://evil\x07link\x1b]8;;\x07\r\n\tindented\x9b31m", " a\x1b[2J.txt | 1 +");
    for (const k of ["summary", "summaryLine", "diffstat"] as const)
      expect(v[k]).not.toMatch(/[\0-\x08\x0b-\x1f\x7f-\x9f]/);
    expect(v.summary).toContain("\n\tindented");
  });

  it("no closing keyword in any of GitHub's or GitLab's forms acts on an issue", () => {
    const forms = [
      "closes #1",
      "Closes JIRA-12",
      "resolves ../issues/9",
      "Fixes: #2",
      "resolved acme/api#3",
      "fix https://github.com/acme/api/issues/4",
      "Closing #5",
      "implements #6",
      "fixes issue #7",
      "FIXED  #8",
    ];
    const v = values(forms.join("\n"));
    // GitHub's and GitLab's patterns: the keyword, an optional colon, whitespace, then the reference.
    for (const line of v.summary!.split("\n"))
      expect(line, line).not.toMatch(
        /\b(?:clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?):?\s+(?:issues?\s+)?(?:[\w./-]*#\d|https?:|[A-Z]+-\d|\.\.\/)/i,
      );
    expect(values("Fixed the bug: it says fixed.").summary).toBe("Fixed the bug: it says fixed."); // words stay as they are
  });

  it("no HTML (hidden comments, images that load from the model's host, tags) and no @mention survives", () => {
    const v = values(
      'LGTM <!-- hidden from the reviewer --> <img src="https://evil.example/p.png"> <details><summary>x</summary></details> ![t](https://evil.example/t.png) cc @octocat @acme/team',
    );
    expect(v.summary).not.toMatch(/<[A-Za-z!/?]/);
    expect(v.summary).not.toMatch(/!\[/);
    expect(v.summary).not.toMatch(/@[A-Za-z0-9]/);
  });

  it("the hosts setup's egress proxy refused (the sandbox chose them) are listed inert: no mention, no image, no HTML", () => {
    const r = {
      summary: "Done.",
      diffstat: " a.txt | 1 +",
      costUsd: 0.1,
      verified: true,
      verify: { exitCode: 0 },
      egress: {
        allowed: 1,
        refused: 2,
        bytesUp: 0,
        bytesDown: 0,
        refusals: ["@octocat:443 (not on the allow-list)", "![t](https://evil.example/t.png)<img>|x:80 (x)"],
      },
    } as unknown as JobResult;
    const v = outcomeValues(def, repo, "camp-L1", r, { task: "Fix it.", verify: "npm test" });
    expect(v.egressRefused).toMatch(/octocat:443 \(not on the allow-list\); .*evil\.example/);
    expect(v.egressRefused).not.toMatch(/@[A-Za-z0-9]|!\[|<[A-Za-z]/);
    const row = render(def.publish.body, v)
      .split("\n")
      .find((l) => l.startsWith("| Refused in setup |"));
    expect(row?.split(/(?<!\\)\|/).length).toBe(4); // one cell: its own | escaped

    expect(values("Done.").egressRefused).toBe("none");
  });

  it("no trailer of the model's makes a co-author or a sign-off (the message's last paragraph is the summary)", () => {
    const v = values(
      "Fixed it.\n\nCo-authored-by: Someone Else <someone@example.com>\nSigned-off-by: Boss <boss@example.com>",
    );
    const message = render(def.publish.message, v);
    expect(message.split("\n\n").at(-1)).not.toMatch(/^[A-Za-z0-9-]+\s*:\s/m);
  });
});

describe("a title carries no invisible character, and the model's mentions and closing keywords in it act on nothing", () => {
  // Summaries a model could write: a "Word:" start (once given a zero-width space), trailers, mentions,
  // closing keywords in GitHub's and GitLab's forms, quick actions, definitions, HTML, controls, bidi.
  const hostile = [
    "Done: bumped the logger",
    "Zero\u200bwidth\u200c\u200d\u2060\ufeff\u00ad and fix\u200bes #1",
    "Co-authored-by: Someone Else <someone@example.com>",
    "cc @octocat and @acme/team (mail ops@example.com)",
    "Fixes: #2, closes acme/api#3 and resolves https://gitlab.com/acme/api/-/issues/4",
    "Closes JIRA-12; implements ../issues/9; FIXED  #8",
    "/approve [x]: https://evil.example <!-- hidden --> ![t](https://evil.example/t.png)",
    "Signed-off-by: Boss <boss@example.com>\u202eevil\u2066\u0000\x1b[2J",
    // What draws nothing without being a format character: CGJ, Hangul fillers, Khmer vowels, the
    // variation selectors (data hidden in text), the blank Braille pattern.
    "hid\u034fden\u115f\u1160\u3164\uffa0 \u17b4\u17b5 da\ufe0f\u{e0100}\u{e01ef}ta \u2800 here",
  ];
  // Zero-width, joiners, direction marks, word joiner and the other format characters, BOM, soft hyphen.
  const INVISIBLE = [0xad, 0x34f, 0x61c, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x180e, 0x2800, 0x3164, 0xfeff, 0xffa0];
  for (let c = 0xfe00; c <= 0xfe0f; c++) INVISIBLE.push(c);
  for (let c = 0xe0100; c <= 0xe01ef; c++) INVISIBLE.push(c);
  for (let c = 0x200b; c <= 0x200f; c++) INVISIBLE.push(c);
  for (let c = 0x202a; c <= 0x202e; c++) INVISIBLE.push(c);
  for (let c = 0x2060; c <= 0x206f; c++) INVISIBLE.push(c);
  const invisible = (t: string) => [...t].filter((ch) => INVISIBLE.includes(ch.codePointAt(0)!));
  const publish = publishSettings(
    { title: "{{campaign}}: {{summaryLine}} | {{summary}} | {{task}} | {{diffstat}}" },
    "chore",
  ) as PublishSettings;
  const title = (summary: string, kind: "github" | "gitlab", settings = publish) => {
    const repo = { line: 1, git: `https://${kind}.com/acme/api.git`, ref: "main", vars: {} };
    const state: PublishState = {
      def: { name: "chore", createdAt: 0, publish: settings, repos: [repo] },
      repo,
      job: {
        line: 1,
        jobId: "chore-L1",
        state: "finished",
        result: {
          line: 1,
          status: "completed",
          verified: true,
          costUsd: 0.1,
          usage: emptyUsage(),
          turns: 1,
          totalMs: 1,
          filesChanged: 1,
          finishedAt: 1,
        },
      },
      prev: undefined,
      forge: { kind, api: true },
      options: { includeUnverified: false, dryRun: true, force: false },
      now: 5_000,
      scrub: (t) => t,
      refused: null,
      outcome: {
        result: {
          status: "completed",
          patch: "p",
          diffstat: ` ${summary} | 1 +`,
          baseCommit: "a".repeat(40),
          verified: true,
          costUsd: 0.1,
          summary,
          verify: { exitCode: 0 },
        } as unknown as JobResult,
        spec: { task: summary, verify: "npm test" },
      },
    };
    const d = planPublish(state);
    const op = "ops" in d ? d.ops[0] : undefined;
    if (op?.op !== "dry-run") throw new Error(`expected a dry run, got ${JSON.stringify(op)}`);
    return op.planned.title;
  };

  it.each(["github", "gitlab"] as const)("on %s: one line, the words kept, nothing invisible", (kind) => {
    for (const summary of [...hostile, hostile.join("\n")]) {
      const t = title(summary, kind);
      expect(invisible(t), summary).toEqual([]);
      expect(t, summary).not.toMatch(/[\0-\x1f\x7f-\x9f]/);
      // No mention (GitLab notifies one in a title), no closing keyword (the squash commit's subject).
      expect(t, summary).not.toMatch(/(?<![A-Za-z0-9_])@[A-Za-z0-9_]/);
      expect(t, summary).not.toMatch(
        /\b(?:clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?):?\s+(?:issues?\s+)?(?:[\w./-]*#\d|https?:|[A-Z]+-\d|\.\.\/)/i,
      );
    }
    expect(title("Done: bumped the logger", kind, publishSettings({}, "chore") as PublishSettings)).toBe(
      "chore: Done: bumped the logger",
    );
    expect(title("cc @octocat, mail ops@example.com", kind)).toMatch(/^chore: cc ＠octocat, mail ops@example\.com \|/);
  });
});

describe("GitLab's quick actions and hidden link definitions in the model's text act on nothing, in every text a forge renders", () => {
  // The model's text (its summary) and the file names it chose (the diffstat), each where a template may put it.
  const hostile = [
    "/approve",
    "/merge",
    "  /ready",
    "> /label ~security",
    "/target_branch main",
    "/assign @me",
    "[hidden]: https://evil.example/x",
    "[^1]: a footnote",
    "[//]: # (hidden from the reviewer)",
    "- [x]: in a list",
  ].join("\n");
  const custom = publishSettings(
    {
      title: "{{summaryLine}}",
      body: "{{summary}}\n{{diffstat}}\n{{task}}",
      commit: { message: "{{summaryLine}}\n\n{{summary}}\n{{diffstat}}" },
    },
    "camp",
  ) as PublishSettings;
  const repo = { line: 1, git: "https://gitlab.com/acme/api.git", vars: {} };

  it.each([
    ["the default templates", publishSettings({}, "camp") as PublishSettings],
    ["templates that put each value at a line's start", custom],
  ])("%s", (_name, publish) => {
    const def = { name: "camp", createdAt: 0, publish, repos: [] };
    const v = outcomeValues(
      def,
      repo,
      "camp-L1",
      {
        summary: hostile,
        diffstat: "/approve | 1 +\n [x]: y | 2 +-",
        costUsd: 0.1,
        verified: true,
        verify: { exitCode: 0 },
      } as unknown as JobResult,
      { task: hostile, verify: "npm test" },
    );
    for (const [what, t] of [
      ["title", def.publish.title],
      ["body", def.publish.body],
      ["commit message", def.publish.message],
    ] as const) {
      const rendered = render(t, v);
      // GitLab's extractor: a slash and a command at a line's start; markdown: `[label]:` opens a definition.
      expect(rendered, what).not.toMatch(/^[ \t>]*\/[A-Za-z0-9_]/m);
      expect(rendered, what).not.toMatch(/\]:/);
    }
    // The words are still there for the reviewer to read.
    expect(v.summary!.replaceAll("\u200b", "")).toBe(hostile);
  });
});

describe("a campaign's branch is a new branch of its own, checked for every repository when the file is read", () => {
  const file = (branch: string, extra = "") =>
    `name: camp\ntask: Fix it.\nrepos:\n  - git: https://git.example.com/acme/api.git\n    ref: main\n  - git: https://git.example.com/acme/x..y.git\n    ref: dev\npublish:\n  branch: "${branch}"\n${extra}`;
  const problems = (text: string) => {
    try {
      parseCampaign(text, "c.yaml");
      return [];
    } catch (err) {
      return (err as CampaignFileError).errors;
    }
  };

  it.each([["-f"], ["--force"], ["HEAD"], ["refs/heads/main"], ["{{ref}}"], ["main"], ["x/{{name}}"], ["a\\u0000b"]])(
    "refuses %j before anything is enqueued",
    (branch) => {
      expect(problems(file(branch)).join("\n")).toMatch(/^c\.yaml:\d+: publish\.branch: /m);
    },
  );

  it("refuses the branch the change is for (publish.base) as the branch to push", () => {
    expect(problems(file("release", "  base: release\n")).join("\n")).toMatch(
      /publish\.branch: .*"release" is the branch the change is for/,
    );
    expect(problems(file("patchbay/camp-{{ref}}"))).toEqual([]);
  });
});

describe("a repository listed twice in another spelling is still listed twice", () => {
  it("refuses the same repository through case in the host, a trailing slash or .git (two jobs, one branch: paid twice, pushed once)", () => {
    const text = `name: camp\ntask: Fix it.\nrepos:\n  - https://GitHub.com/acme/api\n  - https://github.com/acme/api.git/\n  - git@github.com:acme/web.git\n  - git@github.com:acme/web\n  - https://github.com/acme/Other\n  - https://github.com/acme/other\n`;
    let errors: string[] = [];
    try {
      parseCampaign(text, "c.yaml");
    } catch (err) {
      errors = (err as CampaignFileError).errors;
    }
    expect(errors.filter((e) => e.includes("listed twice")).map((e) => /repos\[(\d)\]/.exec(e)![1])).toEqual([
      "1",
      "3",
    ]);
  });
});
