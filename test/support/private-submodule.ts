// A private git submodule for the tests of credentials the egress proxy adds to git over HTTPS: a
// bare repository holding one known file, served by an HTTPS git server with basic auth
// (git-http.ts with `tls`), and a superproject whose .gitmodules points at it by the server's
// name (https://git.test/<name>.git), so that `git submodule update --init` in setup has to
// fetch it through the proxy, which adds the credential. The superproject is made without any
// network: its gitlink is written straight into the index.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** What makePrivateSubmodule made. */
export interface PrivateSubmodule {
  /** The superproject's work tree (one commit on main), a temporary directory the caller removes. */
  superproject: string;
  /** The submodule's URL, as .gitmodules gives it: `<server url>/<name>.git`. */
  url: string;
  /** Where the submodule sits in the superproject. */
  path: string;
  /** The commit of the private repository the superproject records. */
  commit: string;
  /** The known file of the private repository: its path inside the submodule and its content. */
  file: { path: string; content: string };
}

/** Options of makePrivateSubmodule. */
export interface PrivateSubmoduleOptions {
  /** The private repository's name: it is `<root>/<name>.git`. @default "private-lib" */
  name?: string;
  /** Where it sits in the superproject. @default "vendor/private-lib" */
  path?: string;
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, encoding: "utf8" }).trim();

/**
 * Makes the bare repository `<root>/<name>.git` (which a git-http server on `root` serves at
 * `<baseUrl>/<name>.git`) holding one known file, and a superproject with it as a submodule.
 */
export function makePrivateSubmodule(
  root: string,
  baseUrl: string,
  opts: PrivateSubmoduleOptions = {},
): PrivateSubmodule {
  const name = opts.name ?? "private-lib";
  const path = opts.path ?? `vendor/${name}`;
  const file = { path: "PRIVATE.txt", content: `${name}: served over HTTPS to basic auth only\n` };

  const work = mkdtempSync(join(tmpdir(), `pb-${name}-`));
  writeFileSync(join(work, file.path), file.content);
  git(work, "init", "-q", "-b", "main");
  git(work, "add", "-A");
  git(work, "commit", "-qm", `${name}: the private part`);
  const commit = git(work, "rev-parse", "HEAD");
  mkdirSync(root, { recursive: true });
  git(root, "clone", "-q", "--bare", work, `${name}.git`);
  rmSync(work, { recursive: true, force: true });

  const url = `${baseUrl}/${name}.git`;
  const superproject = mkdtempSync(join(tmpdir(), "pb-superproject-"));
  git(superproject, "init", "-q", "-b", "main");
  writeFileSync(join(superproject, "README.md"), `Uses ${name} as a submodule at ${path}.\n`);
  writeFileSync(join(superproject, ".gitmodules"), `[submodule "${name}"]\n\tpath = ${path}\n\turl = ${url}\n`);
  git(superproject, "update-index", "--add", "--cacheinfo", `160000,${commit},${path}`);
  git(superproject, "add", "README.md", ".gitmodules");
  git(superproject, "commit", "-qm", `use ${name}`);
  return { superproject, url, path, commit, file };
}
