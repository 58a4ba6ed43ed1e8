// What a bare repository's branch points at, read with git at the moment it is asked: how the forge
// stand-ins see what a real git server was pushed (their `branchesFrom`).
import { execFileSync } from "node:child_process";

export function bareBranch(gitDir: string, ref: string): string | undefined {
  try {
    return (
      execFileSync("git", ["--git-dir", gitDir, "rev-parse", "--verify", "-q", `refs/heads/${ref}^{commit}`], {
        encoding: "utf8",
      }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}
