// The running-files reporter's list of the processes under a stuck run (test/support/running-files-reporter.ts),
// read from /proc: a blocked worker's children name what it waits on.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { descendants } from "../support/running-files-reporter.js";

describe("the running-files reporter's process list", () => {
  it("lists the processes under a pid, a child's command line among them", async () => {
    const child = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      await new Promise((r) => child.once("spawn", r));
      expect(descendants(process.pid)).toMatch(new RegExp(`^${child.pid} [RS] sleep 30$`, "m"));
      expect(descendants(child.pid!)).toBe("(none)\n");
    } finally {
      child.kill();
    }
  });
});
