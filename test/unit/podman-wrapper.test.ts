// scripts/podman/patchbay-runc's command line and spec handling, with a stand-in runc that records
// its arguments: no engine and no cgroup touched (what it does to cgroups is the Podman half of the
// engine matrix's, from inside real sandboxes).
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const WRAPPER = new URL("../../scripts/podman/patchbay-runc", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "pb-wrapper-"));
const stub = join(dir, "runc");
writeFileSync(stub, `#!/bin/sh\nprintf '%s\\n' "$@" > "${dir}/runc-args"\n`);
chmodSync(stub, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ID = "a".repeat(64);
function wrapper(args: string[]) {
  const r = spawnSync("bash", [WRAPPER, ...args], {
    env: {
      PATH: process.env.PATH,
      PATCHBAY_RUNC: stub,
      XDG_RUNTIME_DIR: "/run/user/4242",
      PATCHBAY_CGROUP_ROOT: join(dir, "no-cgroups"),
    },
    encoding: "utf8",
  });
  return { code: r.status, stderr: r.stderr };
}
function spec(env: string[]): string {
  const bundle = mkdtempSync(join(dir, "bundle-"));
  writeFileSync(join(bundle, "config.json"), JSON.stringify({ process: { env } }));
  return bundle;
}

describe("patchbay-runc (the rootless engine's limits wrapper)", () => {
  it("takes PATCHBAY_LIMITS out of an exec's process spec wherever it stands, and nothing else", () => {
    // (Any array element spelt exactly so goes, an argument too: patchbay's execs never pass one.)
    for (const env of [
      ["A=1", "PATCHBAY_LIMITS=1,2,3,4", "B=2"],
      ["PATCHBAY_LIMITS=1,2,3,4", "B=2"],
      ["A=1", "PATCHBAY_LIMITS=1,2,3,4"],
      ["PATCHBAY_LIMITS=1,2,3,4"],
    ]) {
      const file = join(dir, "process.json");
      writeFileSync(
        file,
        JSON.stringify({ env, args: ["echo", "PATCHBAY_LIMITS=9 and more", 'x"PATCHBAY_LIMITS=1,2,3,4"'] }),
      );
      expect(wrapper(["exec", "--pid-file", "/x", "--process", file, "--detach", ID]).code).toBe(0);
      const after = JSON.parse(readFileSync(file, "utf8")) as { env: string[]; args: string[] };
      expect(after.env).toEqual(env.filter((e) => !e.startsWith("PATCHBAY_LIMITS=")));
      expect(after.args).toEqual(["echo", "PATCHBAY_LIMITS=9 and more", 'x"PATCHBAY_LIMITS=1,2,3,4"']); // not such an element: left alone
      expect(readFileSync(join(dir, "runc-args"), "utf8").trim().split("\n").at(-1)).toBe(ID); // then runc, as asked
    }
  });

  it("refuses a create whose spec holds the limits twice (an image's ENV, say), or a malformed value", () => {
    const twice = wrapper([
      "create",
      "--bundle",
      spec(["PATCHBAY_LIMITS=99999999999,100000,0,100000", "PATCHBAY_LIMITS=1048576,32,0,100000"]),
      ID,
    ]);
    expect(twice).toMatchObject({ code: 125, stderr: expect.stringMatching(/PATCHBAY_LIMITS is set more than once/) });
    const bad = wrapper(["create", "--bundle", spec(["PATCHBAY_LIMITS=1,2"]), ID]);
    expect(bad).toMatchObject({ code: 125, stderr: expect.stringMatching(/malformed PATCHBAY_LIMITS/) });
  });

  it("an escaped quote inside another variable's value is not an entry", () => {
    // The worker's value alone is taken; the stand-in cgroup root has no delegated hierarchies, so
    // the create stops there, naming them.
    const r = wrapper([
      "create",
      "--bundle",
      spec(['AAA="PATCHBAY_LIMITS=99999999999,100000,0,100000', "PATCHBAY_LIMITS=1048576,32,0,100000"]),
      ID,
    ]);
    expect(r).toMatchObject({
      code: 125,
      stderr: expect.stringMatching(/no-cgroups\/memory\/patchbay-rootless-4242 is missing or not the engine user's/),
    });
  });

  it("fails closed on a command line whose create it cannot find, and on an id that is no id", () => {
    expect(wrapper(["--unknown-flag", "value", "create", "--bundle", dir, ID])).toMatchObject({
      code: 125,
      stderr: expect.stringMatching(/cannot tell runc's subcommand/),
    });
    expect(wrapper(["--rootless", "true", "--root", "/r", "kill", ID, "9"]).code).toBe(0);
    expect(readFileSync(join(dir, "runc-args"), "utf8").trim().split("\n")).toEqual([
      "--rootless",
      "true",
      "--root",
      "/r",
      "kill",
      ID,
      "9",
    ]);
    expect(wrapper(["delete", "../../memory"])).toMatchObject({
      code: 125,
      stderr: expect.stringMatching(/refusing container id/),
    });
  });

  it("is valid bash", () => {
    expect(() => execFileSync("bash", ["-n", WRAPPER])).not.toThrow();
  });
});
