// Which forge and repository a git URL names (src/campaign/forge/hosts.ts forgeRepoOf), and the error
// and bounding helpers every forge client uses (forge-error.ts). Pure.
import { describe, expect, it } from "vitest";
import type { ForgeHost } from "../../../src/core/config/forges.js";
import { boundTitle, cutWithNote, forgeError, scrub } from "../../../src/campaign/forge/forge-error.js";
import { forgeRepoOf, makeForge } from "../../../src/campaign/forge/hosts.js";

const GH: ForgeHost = { host: "github.com", kind: "github", apiUrl: "https://api.github.com" };
const GL: ForgeHost = { host: "gitlab.com", kind: "gitlab", apiUrl: "https://gitlab.com" };
const GHE: ForgeHost = { host: "ghe.example.com:8443", kind: "github", apiUrl: "https://ghe.example.com:8443/api/v3" };
const SELF: ForgeHost = { host: "git.corp.example", kind: "gitlab", apiUrl: "https://git.corp.example" };
const HOSTS = [GH, GL, GHE, SELF];
const of = (url: string) => {
  const r = forgeRepoOf(url, HOSTS);
  return r && `${r.host.host} ${r.repo.host} ${r.repo.path}`;
};

describe("forgeRepoOf", () => {
  it.each([
    ["https://github.com/acme/svc", "github.com github.com acme/svc"],
    ["https://github.com/acme/svc.git", "github.com github.com acme/svc"],
    ["https://github.com/acme/svc/", "github.com github.com acme/svc"],
    ["HTTPS://GitHub.com/acme/svc.git", "github.com github.com acme/svc"],
    ["https://github.com:443/acme/svc.git", "github.com github.com acme/svc"],
    ["https://x-access-token:secret@github.com/acme/svc.git", "github.com github.com acme/svc"],
    ["ssh://git@github.com/acme/svc.git", "github.com github.com acme/svc"],
    ["ssh://git@github.com:22/acme/svc.git", "github.com github.com acme/svc"],
    ["git@github.com:acme/svc.git", "github.com github.com acme/svc"],
    ["github.com:acme/svc", "github.com github.com acme/svc"],
    ["https://ghe.example.com:8443/team/app.git", "ghe.example.com:8443 ghe.example.com:8443 team/app"],
    ["https://gitlab.com/group/sub/deeper/name.git", "gitlab.com gitlab.com group/sub/deeper/name"],
    ["git@gitlab.com:group/sub/name.git", "gitlab.com gitlab.com group/sub/name"],
    ["ssh://git@git.corp.example:2222/platform/tools/cli.git", "git.corp.example git.corp.example platform/tools/cli"],
    ["https://oauth2:tok@git.corp.example/platform/cli", "git.corp.example git.corp.example platform/cli"],
  ])("%s → %s", (url, want) => expect(of(url)).toBe(want));

  it.each([
    "https://example.org/acme/svc.git", // not a forge host: a plain remote
    "https://ghe.example.com/team/app.git", // the host's port differs (https)
    "https://github.com/acme", // no repository
    "https://github.com/acme/svc/tree/main", // a page, not a repository
    "https://gitlab.com/group", // no project
    "https://github.com/acme/../svc.git",
    "https://github.com/acme/svc.git?x=1",
    "https://github.com/acme/svc#frag",
    "file:///srv/git/acme/svc.git",
    "/srv/git/acme/svc.git",
    "./acme/svc",
    "git://github.com/acme/svc.git",
    "https://github.com/ac me/svc",
    "",
  ])("%j is a plain git remote", (url) => expect(forgeRepoOf(url, HOSTS)).toBeUndefined());

  it("makeForge gives the host's kind of client", () => {
    expect(makeForge(GH, "t").kind).toBe("github");
    expect(makeForge(SELF, undefined).kind).toBe("gitlab");
  });
});

describe("bounds and errors", () => {
  it("cuts a text with a note, never inside a surrogate pair, and leaves one within the bound alone", () => {
    expect(cutWithNote("short", 10, "body")).toBe("short");
    const cut = cutWithNote("a".repeat(200) + "😀".repeat(200), 300, "body");
    expect(cut.length).toBeLessThanOrEqual(300);
    expect(cut).toMatch(/\n\n… \(cut by patchbay: the body was 600 characters; the forge takes 300\)$/);
    expect(cut.replace(/\n\n…[^]*$/, "")).not.toMatch(/[\ud800-\udbff]$/);
    expect(boundTitle("a\nb", 10)).toBe("a b");
    expect(boundTitle("x".repeat(20), 10)).toBe(`${"x".repeat(9)}…`);
  });

  it("scrub takes the token and control characters out of a forge's words, and bounds them", () => {
    expect(scrub("bad token tok-123456 here\u001b[31m", "tok-123456")).toBe("bad token [token] here [31m");
    expect(scrub("y".repeat(400), undefined)).toHaveLength(301);
    const e = forgeError(
      { kind: "github", host: "github.com", repo: "a/b", what: "creating a pull request", write: true },
      401,
      "token tok-123456 is bad",
      "tok-123456",
    );
    expect(e.message).toBe(
      "GitHub github.com: creating a pull request in a/b failed: the token for github.com is invalid or expired (401); set a valid one in PATCHBAY_FORGE_TOKEN_GITHUB_COM (or GITHUB_TOKEN)",
    );
    const down = forgeError(
      { kind: "gitlab", host: "gitlab.com", repo: "g/p", what: "closing merge request !3", write: true },
      502,
      "<html>tok-123456</html>",
      "tok-123456",
    );
    expect(down.message).toBe(
      "GitLab gitlab.com: closing merge request !3 in g/p failed: gitlab.com answered 502: <html>[token]</html>; try again later",
    );
    expect(down.status).toBe(502);
  });
});
