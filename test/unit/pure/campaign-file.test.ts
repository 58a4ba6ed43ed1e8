// Campaign files (src/campaign/file.ts) and their templates: read as a whole, every problem
// named file:line before anything is enqueued. Pure: no Redis, no git.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CampaignFileError, parseCampaign, readCampaign } from "../../../src/campaign/file.js";
import { publishSettings } from "../../../src/campaign/publish-settings.js";
import { render, templateNames, unknownName } from "../../../src/campaign/template.js";

const problems = (text: string, reposText?: string): string[] => {
  try {
    parseCampaign(text, "campaign.yaml", reposText);
  } catch (err) {
    expect(err).toBeInstanceOf(CampaignFileError);
    return (err as CampaignFileError).errors;
  }
  throw new Error("no problem found");
};

const GOOD = `name: bump-logger
task: |
  In {{name}} ({{repo}} at {{ref}}), {{what}}.
vars:
  what: replace log.warn with logger.warning
verify: python3 -m unittest -q
setup: [pip install -e .]
timeoutSec: 600
budgetUsd: 12.5
repos:
  - git: https://git.example.com/acme/api.git
    ref: main
  - git: https://git.example.com/acme/web.git
    vars: { what: bump the SDK }
    overrides: { verify: npm test, maxTurns: 20 }
  - https://git.example.com/acme/cli.git
publish:
  title: "chore: {{campaign}} in {{name}}"
  commit:
    author: Release Bot <bot@example.com>
`;

describe("campaign files", () => {
  it("a good file: one JobSpec per repository, the shared fields, each repo's vars and overrides, in order", () => {
    const c = parseCampaign(GOOD, "campaign.yaml");
    expect(c.name).toBe("bump-logger");
    expect(c.budgetUsd).toBe(12.5);
    expect(c.lines.map((l) => l.line)).toEqual([1, 2, 3]);
    expect(c.lines[0]!.spec).toMatchObject({
      task: "In api (https://git.example.com/acme/api.git at main), replace log.warn with logger.warning.\n",
      repo: { git: "https://git.example.com/acme/api.git", ref: "main" },
      verify: "python3 -m unittest -q",
      setup: ["pip install -e ."],
      timeoutSec: 600,
    });
    expect(c.lines[1]!.spec).toMatchObject({
      task: "In web (https://git.example.com/acme/web.git at HEAD), bump the SDK.\n",
      verify: "npm test",
      maxTurns: 20,
    });
    expect(c.lines[2]!.spec.repo).toEqual({ git: "https://git.example.com/acme/cli.git" });
    expect(c.publish).toMatchObject({
      branch: "patchbay/bump-logger",
      draft: true,
      title: "chore: {{campaign}} in {{name}}",
      author: { name: "Release Bot", email: "bot@example.com" },
    });
  });

  it("JSON is read as well (YAML reads JSON)", () => {
    const c = parseCampaign(
      JSON.stringify({ name: "j", task: "t {{name}}", repos: [{ git: "https://h.example/a/b.git" }] }),
      "c.json",
    );
    expect(c.lines[0]!.spec.task).toBe("t b");
  });

  it("a repos file: one URL a line, a ref after it, # comments; numbered after the list", () => {
    const c = parseCampaign(
      "name: f\ntask: t\nreposFile: repos.txt\n",
      "c.yaml",
      "# ours\nhttps://h.example/a/one.git main\n\nhttps://h.example/a/two.git\n",
    );
    expect(c.repos.map((r) => [r.line, r.git, r.ref])).toEqual([
      [1, "https://h.example/a/one.git", "main"],
      [2, "https://h.example/a/two.git", undefined],
    ]);
    expect(problems("name: f\ntask: t\nreposFile: r\n", "https://h.example/a.git main extra\n")).toEqual([
      'campaign.yaml reposFile line 1: expected URL [REF], got "https://h.example/a.git main extra"',
    ]);
  });

  it("every problem is named file:line: path, and one bad repository enqueues nothing", () => {
    const text = `name: bad name
task: "fix {{nope}}"
verify: 7
repos:
  - git: https://h.example/a.git
  - { gti: https://h.example/b.git }
  - git: https://h.example/c.git
    overrides: { maxTurns: -1 }
publish:
  title: "{{campaign}} {{wat}}"
  draft: maybe
`;
    const p = problems(text);
    expect(p).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^campaign\.yaml:1: name: must be 1-96 characters/),
        "campaign.yaml:6: repos[1].git: required: a git URL",
        'campaign.yaml:6: repos[1].gti: unknown key (did you mean "git"?): a repository takes git, ref, vars, overrides',
        expect.stringMatching(
          /^campaign\.yaml:2: task: unknown variable \{\{nope\}\} \(known: repo, ref, name, campaign\)/,
        ),
        expect.stringMatching(/^campaign\.yaml:11: publish\.draft: /),
      ]),
    );
    const q = problems(
      "name: ok\ntask: fix\nverify: 7\nrepos:\n  - git: https://h.example/a.git\n  - git: https://h.example/c.git\n    overrides: { maxTurns: -1 }\n",
    );
    // A shared field's problem is the same for every repository: named once, at its own line.
    expect(q).toEqual([
      "campaign.yaml:3: verify: must be a non-empty command (got 7)",
      expect.stringMatching(/^campaign\.yaml:7: repos\[1\] \(https:\/\/h\.example\/c\.git\): maxTurns: /),
    ]);
  });

  it("names every problem of a file in one pass: unknown keys at every level with the key meant, bad values, a missing key", () => {
    const text = `name: bump
taks: Fix it.
repos:
  - git: https://h.example/a.git
    reff: main
  - git: https://h.example/b.git
    overrides:
      timeoutSec: -5
      verfy: npm test
publish:
  titel: x
  commit: { autor: Bot <bot@example.com> }
verfiy: npm test
budgetUsd: -1
`;
    expect(problems(text)).toEqual([
      "campaign.yaml:1: task: required: the task, a template ({{repo}}, {{ref}}, {{name}}, your vars)",
      'campaign.yaml:2: taks: unknown key (did you mean "task"?): not a campaign\'s key (name, task, vars, repos, reposFile, budgetUsd, publish) nor a JobSpec field (docs/jobspec.md)',
      'campaign.yaml:5: repos[0].reff: unknown key (did you mean "ref"?): a repository takes git, ref, vars, overrides',
      "campaign.yaml:8: repos[1] (https://h.example/b.git): timeoutSec: must be a positive number (got -5)",
      'campaign.yaml:9: repos[1] (https://h.example/b.git): verfy: unknown key (did you mean "verify"?)',
      'campaign.yaml:11: publish.titel: unknown key (did you mean "title"?): publish takes branch, base, draft, title, body, commit, transcriptUrl',
      'campaign.yaml:12: publish.commit.autor: unknown key (did you mean "author"?): commit takes author, message',
      'campaign.yaml:13: verfiy: unknown key (did you mean "verify"?): not a campaign\'s key (name, task, vars, repos, reposFile, budgetUsd, publish) nor a JobSpec field (docs/jobspec.md)',
      "campaign.yaml:14: budgetUsd: must be a positive number of USD (got -1)",
    ]);
    // A JobSpec field put beside git: is pointed to overrides:.
    expect(problems("name: a\ntask: t\nrepos:\n  - git: https://h.example/a.git\n    verify: make\n")).toEqual([
      "campaign.yaml:5: repos[0].verify: a JobSpec field, which goes under overrides: for this repository alone (overrides: { verify: ... })",
    ]);
  });

  it("refuses what a campaign cannot hold: repo/jobId keys, a repository twice, credentials in a URL, no repos, YAML errors", () => {
    expect(problems("name: a\ntask: t\njobId: x\nrepos: [https://h.example/a.git]\n")).toEqual([
      expect.stringMatching(/^campaign\.yaml:3: jobId: not in a campaign/),
    ]);
    expect(problems("name: a\ntask: t\nrepos: [https://h.example/a.git, https://h.example/a.git]\n")).toEqual([
      expect.stringMatching(/^campaign\.yaml:3: repos\[1\]: https:\/\/h\.example\/a\.git is listed twice/),
    ]);
    expect(problems("name: a\ntask: t\nrepos: ['https://u:sekret@h.example/a.git']\n").join("\n")).toMatch(
      /carries credentials/,
    );
    expect(problems("name: a\ntask: t\nrepos: ['https://u:sekret@h.example/a.git']\n").join("\n")).not.toMatch(
      /sekret/,
    );
    expect(problems("name: a\ntask: t\n")).toEqual([
      expect.stringMatching(/^campaign\.yaml:1: repos: required: a list of/),
    ]);
    expect(problems("name: a\ntask: t\ntask: u\n")[0]).toMatch(/^campaign\.yaml:3: Map keys must be unique/);
    expect(problems("- a list\n")).toEqual(["campaign.yaml:1: a campaign is a mapping (name:, task:, repos: ...)"]);
    // A billion laughs: aliases are bounded.
    const bomb =
      "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nname: n\ntask: t\nrepos: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n";
    expect(problems(bomb)[0]).toMatch(/alias/i);
  });

  it("readCampaign: a missing file or repos file is named", async () => {
    const dir = mkdtempSync(join(tmpdir(), "pb-campaign-"));
    await expect(readCampaign(join(dir, "none.yaml"))).rejects.toThrow(/none\.yaml: ENOENT/);
    writeFileSync(join(dir, "c.yaml"), "name: a\ntask: t\nreposFile: missing.txt\n");
    await expect(readCampaign(join(dir, "c.yaml"))).rejects.toThrow(/reposFile: ENOENT/);
    writeFileSync(join(dir, "repos.txt"), "https://h.example/a.git\n");
    writeFileSync(join(dir, "c.yaml"), "name: a\ntask: t\nreposFile: repos.txt\n");
    expect((await readCampaign(join(dir, "c.yaml"))).repos).toHaveLength(1);
  });
});

describe("publish settings and templates", () => {
  it("defaults: branch patchbay/<name>, draft, a title and body from the outcome", () => {
    const p = publishSettings(undefined, "c1");
    expect(p).toMatchObject({
      branch: "patchbay/c1",
      draft: true,
      author: { name: "patchbay", email: "patchbay@localhost" },
    });
    expect(publishSettings({ commit: { author: "no email" } }, "c")).toMatch(
      /commit\.author must be "Name <email@host>"/,
    );
    expect(publishSettings({ drafts: true }, "c")).toMatch(/^drafts: unknown key \(did you mean "draft"\?\)/);
  });

  it("templates: names found, unknown ones named, values put in as they are", () => {
    expect(templateNames("{{a}} {{ b }} {{a}} {{c-d}}")).toEqual(["a", "b"]);
    expect(unknownName("{{a}} {{z}}", ["a"])).toBe("unknown variable {{z}} (known: a)");
    expect(unknownName("{{a}}", ["a"])).toBeUndefined();
    expect(render("{{a}}-{{ b }}-{{c}}", { a: "{{b}}", b: "$&" })).toBe("{{b}}-$&-{{c}}");
  });
});
