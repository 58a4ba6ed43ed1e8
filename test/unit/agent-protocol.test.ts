// The file agent's protocol (src/sandbox/agent-protocol.ts): replies checked against their op, the
// version handshake, the one errno table. The pure parts, then a real agent on the local backend.
//
// Backend: local (the backend itself; the file agent on it).
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERRNO, parseReply, PROTOCOL_VERSION } from "../../src/sandbox/agent-protocol.js";
import { AGENT_SCRIPT, agentArgv, FileAgent } from "../../src/sandbox/file-agent.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { backendOf } from "../../src/backend/index.js";

describe("agent protocol (pure)", () => {
  it("takes a reply that fits its op, or an error; anything else is a violation", () => {
    expect(parseReply("stat", { type: "file", size: 3, mode: 420, mtime: 1, real: "/w/a", link: false })).toMatchObject(
      { ok: true },
    );
    expect(parseReply("stat", { missing: true })).toEqual({ ok: true, reply: { missing: true } });
    expect(parseReply("read", { error: "ENOENT", message: "No such file" })).toEqual({
      ok: false,
      error: { error: "ENOENT", message: "No such file" },
    });
    expect(parseReply("run", { exit: 0, out: 1, err: 0, truncated: false, timedOut: false })).toMatchObject({
      ok: true,
    });
    expect(parseReply("run", { exit: "0", out: 1, err: 0, truncated: false, timedOut: false })).toBeUndefined();
    expect(
      parseReply("stat", { type: "socket", size: 3, mode: 420, mtime: 1, real: "/w/a", link: false }),
    ).toBeUndefined();
    expect(parseReply("digest", { digest: "not hex" })).toBeUndefined();
    expect(parseReply("list", { entries: "a" })).toBeUndefined();
  });

  it("a stat may say it read the file (or that it is the content the worker holds); a hello what it has", () => {
    const st = { type: "file", size: 3, mode: 420, mtime: 1, real: "/w/a", link: false };
    expect(parseReply("stat", { ...st, read: true, same: true })).toMatchObject({ ok: true, reply: { same: true } });
    expect(parseReply("stat", { ...st, read: false })).toBeUndefined();
    expect(parseReply("hello", { pid: 1, root: true, version: 2, has: ["splice"] })).toMatchObject({ ok: true });
    expect(parseReply("hello", { pid: 1, root: true, version: 2 })).toMatchObject({ ok: true });
    expect(parseReply("hello", { pid: 1, root: true, version: 2, has: "splice" })).toBeUndefined();
  });

  it("the python side has no errno table of its own: it gets the one in agent-protocol.ts", () => {
    const py = readFileSync(new URL("../../src/sandbox/py/file_agent.py", import.meta.url), "utf8");
    expect(py).not.toMatch(/"ENOENT"|"EACCES"|"ENOSPC"/);
    expect(JSON.parse(agentArgv().at(-1)!)).toMatchObject({ errno: ERRNO });
    expect(py).toMatch(new RegExp(`^VERSION = ${PROTOCOL_VERSION}$`, "m"));
  });
});

describe("agent protocol (a real agent, local backend)", () => {
  let sb: Sandbox;
  beforeAll(async () => {
    sb = await Sandbox.create({ backend: backendOf("local"), labels: { "patchbay.test": "agent-protocol" } });
  });
  afterAll(async () => {
    await sb?.destroy();
  });

  it("an agent that speaks another version is not talked to (files go through exec instead)", async () => {
    const other = new FileAgent(sb.box, { argv: agentArgv(AGENT_SCRIPT.replace(/^VERSION = \d+$/m, "VERSION = 999")) });
    expect(await other.start()).toBe(false);
    expect(await other.request({ op: "stat", path: "/" })).toBeUndefined();
    other.close();
    const same = new FileAgent(sb.box);
    expect(await same.start()).toBe(true);
    expect((await same.request({ op: "stat", path: "/workspace" }))?.reply).toMatchObject({ type: "directory" });
    same.close();
  });

  it("an OSError reaches the worker by the table's name", async () => {
    const r = await new FileAgent(sb.box).request({ op: "read", path: "/workspace/none", max: 10 });
    expect(r?.error).toMatchObject({ error: "ENOENT" });
  });
});
