// Red team of the repository's instructions read from a real sandbox (src/job/instructions.ts and
// the file agent's read): what a repo's tree can make patchbay read or say. Each case names its
// attack.
//
// Backend: Docker.
import { describe, expect, it } from "vitest";
import { readRepoInstructions } from "../../src/job/instructions.js";
import { useSandbox } from "../support/sandbox.js";

// Swaps `l` and AGENTS.md for ever, each swap one atomic renameat2(RENAME_EXCHANGE).
const EXCHANGE =
  "'import ctypes, itertools; c = ctypes.CDLL(None); " +
  '[c.renameat2(-100, b"l", -100, b"AGENTS.md", 2) for _ in itertools.count()]\'';

describe("the repository's instructions against a hostile tree", { timeout: 120_000 }, () => {
  const sb = useSandbox({ labels: { "patchbay.test": "redteam-instructions" } });
  const sh = async (cmd: string) => {
    const r = await sb().shell.run(cmd);
    expect(r.exitCode, r.output).toBe(0);
    return r.output;
  };

  // Attack: `.github` a regular file. Its copilot-instructions.md is then simply absent, but it was
  // named as left out (the dashboard's warning, "1 file left out") with the errno's message.
  it("a .github that is a file is no instruction file, not one refused", async () => {
    await sh("cd /workspace && rm -rf -- * .[!.]* 2>/dev/null; echo hi > AGENTS.md && echo x > .github");
    const r = await readRepoInstructions(sb().files);
    expect(r.files).toEqual(["AGENTS.md"]);
    expect(r.refused).toEqual([]);
  });

  // Attack: an instruction file that is not text. A sparse 100 TiB CLAUDE.md gave 32 KiB of NULs,
  // and every byte of invalid UTF-8 became a U+FFFD of 3 bytes: the 32 KiB bound held on the
  // files' bytes, but the model was offered up to three times that, and tokens of nothing.
  it("offers no file that is not UTF-8 text (NULs, a sparse file, invalid bytes)", async () => {
    await sh(
      "cd /workspace && rm -rf -- * .[!.]* 2>/dev/null; printf 'ok \\303\\251\\n' > AGENTS.md && " +
        "truncate -s 100T CLAUDE.md && mkdir .github && head -c 20000 /dev/zero | tr '\\0' '\\377' > .github/copilot-instructions.md",
    );
    const r = await readRepoInstructions(sb().files);
    expect(r.files).toEqual(["AGENTS.md"]);
    expect(r.text).toContain("ok \u00e9");
    expect(r.text).not.toMatch(/[\u0000\ufffd]/);
    expect(r.refused).toEqual([
      { path: "CLAUDE.md", reason: "not UTF-8 text: not read" },
      { path: ".github/copilot-instructions.md", reason: "not UTF-8 text: not read" },
    ]);
  });

  // Attack: a process of the repo's (an MCP server of the spec, started before the read) swaps
  // AGENTS.md between a regular file and a symlink out of the tree. The stat saw a file, the open
  // followed the link, and the check of the path came after the open (realpath of the name, not of
  // what was opened): a swap back in between passed the check with the link target's bytes.
  it("never reads through a symlink swapped in between the stat and the read", async () => {
    await sh("cd /workspace && rm -rf -- * .[!.]* 2>/dev/null; mkdir -p /tmp/rt && echo OUTSIDE-SECRET > /tmp/rt/s");
    const pid = (
      await sh(
        "cd /workspace && echo inside > AGENTS.md && ln -s /tmp/rt/s l && (setsid python3 -c " +
          EXCHANGE +
          " >/dev/null 2>&1 & echo $!)",
      )
    ).trim();
    try {
      for (let i = 0; i < 2000; i++) {
        const r = await readRepoInstructions(sb().files);
        expect(r.text, `read ${i}`).not.toContain("OUTSIDE-SECRET");
      }
    } finally {
      await sb().shell.run(`kill -9 -- -${pid} ${pid} 2>/dev/null; true`);
    }
  });
});
