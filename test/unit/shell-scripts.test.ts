// The bash patchbay runs (src/job/sh/, src/sandbox/sh/: see src/core/assets.ts) as real files: each
// with a header saying what it does, takes, prints and exits with; each one bash can parse, alone
// and as the worker puts it together; the values they share with the TypeScript (the private
// store's paths, the attributes, the agent's uid and setpriv prefix, the bounds) written once, in
// vars.sh, and the same as the TypeScript constants; tar-extract.sh the same tar as TAR_EXTRACT.
// Run on the host's bash (no Docker): what the scripts do in a sandbox is for the tests of their
// callers (repo-patch, patch-statcache, sandbox-files, sandbox-shell, sandbox-run, resume, ...).
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { asset } from "../../src/core/assets.js";
import { ATTRIBUTES, GIT, GIT_VARS, INDEX, INDEX_TREE, REFRESH, STORE } from "../../src/job/git-store.js";
import { LIST_MAX } from "../../src/job/patch.js";
import { PRIVATE_DIR } from "../../src/backend/types.js";
import { AGENT_GID, AGENT_UID, AS_AGENT_SH } from "../../src/backend/agent-user.js";
import { READY, TAR_EXTRACT, TAR_SCRIPT } from "../../src/sandbox/stream.js";
import { ROOT } from "../support/cli-helpers.js";

const SRC = join(ROOT, "src");
const SH = readdirSync(SRC, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile() && e.name.endsWith(".sh"))
  .map((e) => relative(SRC, join(e.parentPath, e.name)))
  .sort();
const tmp = mkdtempSync(join(tmpdir(), "patchbay-sh-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** bash -n: whether bash parses `script` (run nothing); its complaint otherwise. */
function parses(script: string): string {
  const r = spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });
  return r.status === 0 ? "" : r.stderr || `exit ${r.status}`;
}

describe("bash as real files", () => {
  it("each script has its header: what it is, its arguments, environment, output and exit status", () => {
    expect(SH).toEqual(
      expect.arrayContaining([
        "job/sh/vars.sh",
        "job/sh/git-store.sh",
        "job/sh/baseline.sh",
        "job/sh/patch.sh",
        "job/sh/checkpoint.sh",
        "sandbox/sh/files-exec.sh",
        "sandbox/sh/shell-init.sh",
        "sandbox/sh/tar-extract.sh",
      ]),
    );
    for (const p of SH) {
      const text = asset(p);
      const lines = text.split("\n");
      const header = lines
        .slice(
          0,
          lines.findIndex((l) => !l.startsWith("#")),
        )
        .join("\n");
      const base = p.split("/").pop()!;
      expect(header, `${p}: the header starts "# ${base}: what it does"`).toMatch(
        new RegExp(`^# ${base.replace(".", "\\.")}: \\S`),
      );
      for (const part of ["Arguments", "Environment", "Prints", "Exit status"])
        expect(header, `${p}: the header says its ${part}`).toMatch(new RegExp(`^# ${part}: \\S`, "m"));
      expect(parses(text), p).toBe("");
    }
  });

  it("the scripts as the worker puts them together parse too", () => {
    const agentGit = asset("job/sh/agent-git.sh");
    const composed = {
      GIT,
      baseline: GIT + asset("job/sh/baseline.sh"),
      deferred: GIT + asset("job/sh/deferred.sh"),
      patch: GIT + asset("job/sh/patch.sh"),
      checkpoint: GIT + asset("job/sh/checkpoint.sh"),
      rediff: GIT + asset("job/sh/rediff.sh"),
      apply: GIT_VARS + asset("job/sh/apply-checkpoint.sh"),
      agentPart: agentGit + asset("job/sh/baseline-agent.sh"),
      agentRepo: agentGit + asset("job/sh/agent-repo.sh"),
    };
    for (const [name, script] of Object.entries(composed)) expect(parses(script), name).toBe("");
    // A broken script is told: the check can fail.
    expect(parses(GIT + "if true; then\n")).not.toBe("");
  });

  it("vars.sh holds the values the TypeScript has, and is the one script that writes them", () => {
    const show = `${GIT_VARS}\nprintf '%s\\0' "$PRIVATE_DIR" "$STORE" "$INDEX" "$INDEX_TREE" "$REFRESH" "$ATTRIBUTES" "$LIST_MAX" "$AGENT_UID" "$AGENT_GID" "\${AS_AGENT[*]}" "\${#AS_AGENT[@]}"`;
    const got = execFileSync("bash", ["--noprofile", "--norc", "-c", show], { encoding: "utf8" })
      .split("\0")
      .slice(0, -1);
    expect(got).toEqual([
      PRIVATE_DIR,
      STORE,
      INDEX,
      INDEX_TREE,
      REFRESH,
      ATTRIBUTES,
      String(LIST_MAX),
      String(AGENT_UID),
      String(AGENT_GID),
      AS_AGENT_SH,
      String(AS_AGENT_SH.split(" ").length),
    ]);
    // The other scripts take them from it: no path of the private store, uid or setpriv of their own.
    for (const p of SH.filter((p) => p !== "job/sh/vars.sh")) {
      const code = asset(p)
        .split("\n")
        .filter((l) => !l.startsWith("#"))
        .join("\n");
      expect(code, p).not.toMatch(new RegExp(`${PRIVATE_DIR}\\b|\\b${AGENT_UID}\\b|setpriv|-text !eol`));
    }
  });

  it("tar-extract.sh says READY, then runs TAR_EXTRACT into its directory", () => {
    // A `tar` of ours first on PATH, which prints the words it was given.
    writeFileSync(join(tmp, "tar"), '#!/bin/sh\nprintf "%s\\n" "$0" "$@"\n');
    chmodSync(join(tmp, "tar"), 0o755);
    const out = execFileSync("bash", ["--noprofile", "--norc", "-c", TAR_SCRIPT, "tar", "/some/dir"], {
      encoding: "utf8",
      env: { PATH: `${tmp}:/usr/bin:/bin` },
    });
    expect(out).toBe(`${READY}${[join(tmp, "tar"), ...TAR_EXTRACT.slice(1), "/some/dir"].join("\n")}\n`);
    // No tar: 127 and nothing said, so the worker sends nothing.
    const none = spawnSync("/bin/bash", ["--noprofile", "--norc", "-c", TAR_SCRIPT, "tar", "/some/dir"], {
      encoding: "utf8",
      env: { PATH: join(tmp, "empty") },
    });
    expect([none.status, none.stdout]).toEqual([127, ""]);
  });

  it("put-files.sh writes each file from the head of stdin, then runs the command with the rest", () => {
    const dir = join(tmp, "put");
    const files = [
      { path: join(dir, "a/b/one.bin"), data: Buffer.from([0, 1, 2, 10, 255]) },
      { path: join(dir, "two"), data: Buffer.from("") },
      { path: join(dir, "three"), data: Buffer.from("x\n") },
    ];
    const argv = [
      "--noprofile",
      "--norc",
      "-c",
      asset("sandbox/sh/put-files.sh"),
      "put",
      String(files.length),
      ...files.flatMap((f) => [String(f.data.length), f.path]),
      "bash",
      "-c",
      'printf "%s|" "$@"; cat',
      "cmd",
      "x y",
    ];
    const out = execFileSync("bash", argv, {
      input: Buffer.concat([...files.map((f) => f.data), Buffer.from("rest")]),
    });
    expect(out.toString()).toBe("x y|rest");
    for (const f of files) expect(readFileSync(f.path)).toEqual(f.data);
    expect(
      spawnSync("stat", ["-c", "%a", join(dir, "a/b"), files[0]!.path], { encoding: "utf8" })
        .stdout.split("\n")
        .slice(0, 2),
    ).toEqual(["700", "600"]);
  });
});
