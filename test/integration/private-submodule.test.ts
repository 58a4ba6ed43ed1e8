// Guards the HTTPS git server with basic auth (test/support/git-http.ts with `tls`) and the
// superproject whose private submodule it serves (test/support/private-submodule.ts), as the
// egress-credential tests use them: from this host, git trusting the test CA clones the private
// repository with the user's credentials and is refused without them; git that does not trust the
// CA never reaches the repository; the superproject's submodule, fetched by its name, has the
// known file at the recorded commit.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";
import { makePrivateSubmodule, type PrivateSubmodule } from "../support/private-submodule.js";

const USER = { username: "ci-bot", password: "pw-git-test-5f2c" };
let dir = "";
let server: GitHttpServer;
let sub: PrivateSubmodule;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "pb-git-https-"));
  server = await startGitHttp(join(dir, "repos"), { auth: USER, tls: { name: "git.test" } });
  sub = makePrivateSubmodule(join(dir, "repos"), server.url);
});
afterAll(async () => {
  await server?.close();
  if (sub) rmSync(sub.superproject, { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// git on this host with no configuration of its own: the name mapped to the server's address,
// the test CA trusted (unless `trust` is false), credentials from a helper when given, no prompt.
// Asynchronous: the server answers from this very process.
async function hostGit(cwd: string, args: string[], o: { creds?: boolean; trust?: boolean } = {}): Promise<string> {
  const helper = `!f() { test "$1" = get && printf 'username=${USER.username}\\npassword=${USER.password}\\n'; }; f`;
  const config = [
    `http.curloptResolve=git.test:443:${server.tls!.ip}`,
    ...(o.trust === false ? [] : [`http.sslCAInfo=${server.tls!.caFile}`]),
    "credential.helper=",
    ...(o.creds ? [`credential.helper=${helper}`] : []),
    "protocol.file.allow=always",
  ];
  const { stdout } = await promisify(execFile)("git", [...config.flatMap((c) => ["-c", c]), ...args], {
    cwd,
    timeout: 60_000,
    env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0" },
  });
  return stdout;
}

// The stderr of a git command that must fail.
const failure = (run: Promise<unknown>): Promise<string> =>
  run.then(
    () => {
      throw new Error("expected git to fail");
    },
    (e: { stderr?: string }) => String(e.stderr),
  );

describe("the HTTPS git server", () => {
  it("serves git.test by name on an address of its own, with a certificate from its own CA", () => {
    expect(server.url).toBe("https://git.test");
    expect(server.host).toBe("git.test");
    expect(server.tls!.ip).toMatch(/^127\.218\.\d+\.1$/);
    expect(readFileSync(server.tls!.caFile, "utf8")).toBe(server.tls!.caPem);
  });

  it("clones the private repository with the credentials, and refuses it without them", async () => {
    const before = server.authorized();
    await hostGit(dir, ["clone", "-q", sub.url, "with-creds"], { creds: true });
    expect(readFileSync(join(dir, "with-creds", sub.file.path), "utf8")).toBe(sub.file.content);
    expect(server.authorized()).toBeGreaterThan(before);
    const basic = `Basic ${Buffer.from(`${USER.username}:${USER.password}`).toString("base64")}`;
    expect(server.requests.some((r) => r.authorization === basic)).toBe(true);

    const seen = server.requests.length;
    const authorized = server.authorized();
    expect(await failure(hostGit(dir, ["clone", "-q", sub.url, "no-creds"]))).toMatch(
      /could not read Username|Authentication failed/,
    );
    expect(server.requests.length).toBeGreaterThan(seen); // it reached the server and was refused there
    expect(server.authorized()).toBe(authorized);
  });

  it("is not trusted without the test CA", async () => {
    const seen = server.requests.length;
    expect(await failure(hostGit(dir, ["clone", "-q", sub.url, "untrusted"], { creds: true, trust: false }))).toMatch(
      /certificate/i,
    );
    expect(server.requests.length).toBe(seen);
  });
});

describe("makePrivateSubmodule", () => {
  it("makes a superproject whose submodule, fetched by name with the credentials, holds the known file", async () => {
    expect(readFileSync(join(sub.superproject, ".gitmodules"), "utf8")).toContain(
      `url = https://git.test/private-lib.git`,
    );
    const clone = join(dir, "super");
    await hostGit(dir, ["clone", "-q", sub.superproject, clone]);
    expect(await failure(hostGit(clone, ["submodule", "update", "--init"]))).toMatch(
      /could not read Username|Authentication failed/,
    );
    await hostGit(clone, ["submodule", "update", "--init"], { creds: true });
    expect(readFileSync(join(clone, sub.path, sub.file.path), "utf8")).toBe(sub.file.content);
    expect((await hostGit(join(clone, sub.path), ["rev-parse", "HEAD"])).trim()).toBe(sub.commit);
  });
});
