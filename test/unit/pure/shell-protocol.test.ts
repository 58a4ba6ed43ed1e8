// findMarker: what the worker holds while it looks for a command's end. Pure, no Docker.
import { describe, expect, it } from "vitest";
import { findMarker } from "../../../src/sandbox/shell-protocol.js";

const M = Buffer.from("\nPBENDabc:");
const b = (s: string) => Buffer.from(s);

describe("findMarker", () => {
  it("a complete marker: its status and where the line ends", () => {
    expect(findMarker(b("out\nPBENDabc:0\nrest"), M)).toEqual({ at: 3, code: 0, end: 15 });
    expect(findMarker(b("\nPBENDabc:127\n"), M)).toEqual({ at: 0, code: 127, end: 14 });
  });

  it("a marker that may yet complete holds at most a few bytes", () => {
    expect(findMarker(b("out\nPBENDabc:"), M)).toEqual({ at: 3 });
    expect(findMarker(b("out\nPBENDabc:12"), M)).toEqual({ at: 3 });
    expect(findMarker(b("out\nPBENDabc:123"), M)).toEqual({ at: 3 });
  });

  it("marker text followed by anything else is output, however long (a forged marker and a flood)", () => {
    expect(findMarker(b(`\nPBENDabc:${"y".repeat(1 << 20)}`), M)).toBeUndefined();
    expect(findMarker(b("\nPBENDabc:1234\n"), M)).toBeUndefined(); // bash's statuses are 0-255
    expect(findMarker(b("\nPBENDabc:\n"), M)).toBeUndefined();
    expect(findMarker(b("\nPBENDabc:-1\n"), M)).toBeUndefined();
  });

  it("a false marker before a real one: the real one is found", () => {
    const s = b("\nPBENDabc:yyyy\nPBENDabc:3\n");
    expect(findMarker(s, M)).toEqual({ at: 14, code: 3, end: 26 });
  });

  it("nothing like a marker: undefined", () => {
    expect(findMarker(b("plain output\n"), M)).toBeUndefined();
    expect(findMarker(b(""), M)).toBeUndefined();
  });
});
