// The editor's filesystem on a sandbox (src/tools/editor-tool.ts's SandboxFs) holds the content it
// last read of a few files, to spare sending an unchanged one again: bounded in files and bytes.
//
// Backend: none (a stand-in for the sandbox's files).
import { describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { SandboxFs } from "../../src/tools/editor-tool.js";

const W = "/workspace";
describe("the editor's held files (SandboxFs)", () => {
  it("holds at most 256 files, however small, and charges each its path: the worker's memory stays bounded", async () => {
    const asked: (string | undefined)[] = [];
    const sb = {
      files: {
        statRead: async (p: string, _read?: number, known?: { sha256: string }) => {
          asked.push(known?.sha256);
          return { type: "file" as const, size: 0, bytes: Buffer.alloc(0), path: p };
        },
      },
    } as unknown as Sandbox;
    const fs = new SandboxFs(sb);
    const long = `${W}/${"d/".repeat(500)}`;
    for (let i = 0; i < 2000; i++) await fs.stat(`${long}${i}`, 100);
    const held = (fs as unknown as { known: Map<string, unknown> }).known;
    expect(held.size).toBe(256);
    // The newest are held: the last path is asked with its hash, the first no longer is.
    asked.length = 0;
    await fs.stat(`${long}1999`, 100);
    await fs.stat(`${long}0`, 100);
    expect(asked[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(asked[1]).toBeUndefined();
  });
});
