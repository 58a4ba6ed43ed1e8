// The repositories the campaign tests publish to: a bare repo whose main holds one commit with
// app.txt's bug (`value = bug`, which the scripted model fixes), pushable over smart HTTP
// (test/support/git-http.ts). campaign-e2e and line-ids make theirs the same way.
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** git with a committer of its own, in `cwd`; its output trimmed. */
export const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, encoding: "utf8" }).trim();

/** Makes the bare repo `bare` for `name` (its work tree a temporary directory under `dir`). */
export function makeBugRepo(dir: string, bare: string, name: string): void {
  const work = mkdtempSync(join(dir, `${name}-`));
  writeFileSync(join(work, "app.txt"), `name = ${name}\nvalue = bug\n`);
  git(work, "init", "-q", "-b", "main");
  git(work, "add", "-A");
  git(work, "commit", "-qm", "init");
  git(dir, "clone", "-q", "--bare", work, bare);
  git(bare, "config", "http.receivepack", "true");
}
