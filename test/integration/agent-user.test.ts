// The agent's identity (src/backend/agent-user.ts) is the image's: the Dockerfile's `agent` user has
// AGENT_UID, and AS_AGENT run by root in the sandbox image gives a process with the agent's uid, gid
// and only group, and no capabilities at all.
//
// Backend: Docker (the hardened container and its image).
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { AGENT_GID, AGENT_UID, AGENT_USER, AS_AGENT, AS_AGENT_SH } from "../../src/backend/agent-user.js";

const run = promisify(execFile);

describe("the agent user", () => {
  it("is the one the sandbox image creates", () => {
    const dockerfile = readFileSync(new URL("../../images/sandbox/Dockerfile", import.meta.url), "utf8");
    expect(dockerfile).toMatch(new RegExp(`useradd --uid ${AGENT_UID} .*\\bagent\\b`));
    expect(AGENT_USER).toBe(`${AGENT_UID}:${AGENT_GID}`);
    expect(AS_AGENT_SH.split(" ")).toEqual([...AS_AGENT]);
  });

  it("AS_AGENT, run by root in the sandbox image, is the agent with no capabilities", async () => {
    const probe = "id -u; id -g; id -G; grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status";
    const { stdout } = await run("docker", [
      "run",
      "--rm",
      "--network",
      "none",
      "--user",
      "0:0",
      "patchbay-sandbox:latest",
      ...AS_AGENT,
      "sh",
      "-c",
      probe,
    ]);
    const [uid, gid, groups, ...caps] = stdout.trim().split("\n");
    expect([uid, gid, groups]).toEqual([String(AGENT_UID), String(AGENT_GID), String(AGENT_GID)]);
    expect(caps.map((l) => l.replace(/\s+/g, " "))).toEqual([
      "CapInh: 0000000000000000",
      "CapPrm: 0000000000000000",
      "CapEff: 0000000000000000",
      "CapAmb: 0000000000000000",
    ]);
  }, 60_000);
});
