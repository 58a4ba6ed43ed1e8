// The setup shell's state carried into the agent's fresh shell (src/sandbox/shell-state.ts): what
// a hostile shell prints is parsed strictly and bounded, and the fresh shell gets it as variables
// only. Pure logic, with the host's bash standing in for both shells (no Docker).
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  CAPTURE_STATE,
  carried,
  parseShellState,
  startScript,
  STATE_MAX_BYTES,
} from "../../src/sandbox/shell-state.js";

/** Runs `script` in a clean `bash --noprofile --norc` with `env` only; its stdout. */
function bash(script: string, env: Record<string, string> = {}): string {
  const r = spawnSync("bash", ["--noprofile", "--norc", "-c", script], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    cwd: "/tmp",
    encoding: "utf8",
  });
  return r.stdout;
}

describe("capturing a shell's state", () => {
  it("takes $PWD and every exported variable that is set, values byte for byte", () => {
    const out = bash(
      `cd /usr && export A='x y' B=$'line1\\nline2' C= && D=not-exported && export -f cd 2>/dev/null; ${CAPTURE_STATE}`,
      { PRE: "it's" },
    );
    const s = parseShellState(`junk before${out}junk after`)!;
    expect(s.cwd).toBe("/usr");
    const env = Object.fromEntries(s.env);
    expect(env).toMatchObject({ A: "x y", B: "line1\nline2", C: "", PRE: "it's" });
    expect(env.D).toBeUndefined();
    expect(env.PWD).toBeUndefined(); // bash's own
  });

  it("refuses what is not whole, over its bounds, or not absolute", () => {
    expect(parseShellState("no marker")).toBeUndefined();
    expect(parseShellState("PBSTATE\0/w\0A\0b\0")).toBeUndefined(); // no end marker
    expect(parseShellState("PBSTATE\0relative\0PBSTATEEND\0")).toBeUndefined();
    expect(parseShellState(`PBSTATE\0/w\0A\0${"x".repeat(STATE_MAX_BYTES)}\0PBSTATEEND\0`)).toBeUndefined();
    expect(parseShellState("PBSTATE\0/w\0PBSTATEEND\0")).toEqual({ cwd: "/w", env: [] });
  });

  it("never carries what bash runs as code, the loader's hooks, or bash's own state", () => {
    for (const name of [
      "BASH_ENV",
      "ENV",
      "LD_PRELOAD",
      "LD_AUDIT",
      "SHELLOPTS",
      "BASHOPTS",
      "PS4",
      "PROMPT_COMMAND",
      "BASH_FUNC_f%%",
      "IFS",
      "PWD",
      "SHLVL",
      "HISTFILE",
      "__pb_fd",
      "TERM",
      "TMOUT",
      "FUNCNEST",
      "a-b",
      "1A",
      "",
    ])
      expect(carried(name), name).toBe(false);
    for (const name of ["PATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "npm_config_cache", "_X"])
      expect(carried(name), name).toBe(true);
    const s = parseShellState("PBSTATE\0/w\0BASH_ENV\0/tmp/x\0PS4\0$(x)\0OK\0yes\0BAD\0\uFFFD\0PBSTATEEND\0")!;
    expect(s.env).toEqual([["OK", "yes"]]);
  });
});

describe("starting a fresh shell from it", () => {
  it("sets the variables as data, unsets the image's that setup unset, and goes to the directory", () => {
    const hostile = "'$(touch /tmp/pb-shell-state-pwned)'\"; `id` \\ \n end";
    const script = startScript({
      cwd: "/usr/share",
      env: [
        ["V", hostile],
        ["PATH", "/opt/bin:/usr/bin:/bin"],
      ],
    });
    const out = bash(`${script}builtin printf '%s|%s|%s|%s' "$V" "$PWD" "$PATH" "\${GONE-unset}"`, {
      GONE: "from the image",
    });
    expect(out).toBe(`${hostile}|/usr/share|/opt/bin:/usr/bin:/bin|unset`);
    expect(bash("[ -e /tmp/pb-shell-state-pwned ] && echo pwned || echo clean")).toBe("clean\n");
  });

  it("never unsets PATH or HOME, even where the state has neither (a shell taken over answers with little)", () => {
    const script = startScript({ cwd: "/", env: [] });
    expect(
      bash(`${script}builtin printf '%s|%s|%s' "$PATH" "$HOME" "\${GONE-unset}"`, {
        PATH: "/usr/bin:/bin",
        HOME: "/home/agent",
        GONE: "x",
      }),
    ).toBe("/usr/bin:/bin|/home/agent|unset");
  });

  it("starts in /workspace's stead where setup's directory is gone, and keeps what may not be carried", () => {
    const script = startScript({ cwd: "/nonexistent/dir", env: [] });
    expect(bash(`cd /; ${script}echo "[$PWD] [$TERM]"`, { TERM: "dumb" })).toMatch(/^\[\/(workspace)?\] \[dumb\]\n$/);
  });
});
