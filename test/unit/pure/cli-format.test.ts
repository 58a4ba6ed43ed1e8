// Human progress lines (`patchbay run` / `patchbay watch`): everything in a transcript event comes from a
// hostile repo or model, so no terminal control sequence may reach the terminal through formatEvent.
// The worker's log lines carry such texts too (a job's error): the same holds for them.
import { describe, expect, it } from "vitest";
import { formatEvent } from "../../../src/cli/format.js";
import type { TranscriptEvent } from "../../../src/core/spec/spec.js";
import { safeText } from "../../../src/core/term.js";
import { workerLogger } from "../../../src/observability/log.js";

const base = { ts: "2025-01-02T12:34:56.000Z", jobId: "j1", attempt: 1 };
const usage = { inputTokens: 1, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 };

/** Bytes a terminal would act on: C0 (one-line output has no newline or tab either), DEL, C1. */
const CONTROL = /[\x00-\x1f\x7f\x80-\x9f]/;
const BIDI = /[\u202a-\u202e\u2066-\u2069]/;

// [name, payload, a fragment of the payload that must not be shown as text]
const PAYLOADS: [string, string, string | undefined][] = [
  ["OSC 52 clipboard write (BEL)", "\x1b]52;c;SGVsbG8=\x07", "SGVsbG8"],
  ["OSC 52 clipboard write (ST)", "\x1b]52;c;SGVsbG8=\x1b\\", "SGVsbG8"],
  ["OSC 0 title", "\x1b]0;pwned\x07", "pwned"],
  ["OSC 2 title (ST)", "\x1b]2;pwned\x1b\\", "pwned"],
  ["OSC 8 hyperlink", "\x1b]8;;https://evil.example/\x1b\\", "evil"],
  ["CSI clear screen and home", "\x1b[2J\x1b[H", "2J"],
  ["CSI colour", "\x1b[31m", "31m"],
  ["CSI cursor up and erase line", "\x1b[1A\x1b[2K", "1A"],
  ["CSI private mode (alternate screen)", "\x1b[?1049h", "1049"],
  ["8-bit CSI", "\x9b31m", "31m"],
  ["DCS", "\x1bP+q544e\x1b\\", "544e"],
  ["8-bit DCS", "\x90+q544e\x9c", "544e"],
  ["8-bit OSC title", "\x9d0;pwned\x9c", "pwned"],
  ["8-bit OSC title (BEL)", "\x9d0;pwned\x07", "pwned"],
  ["APC", "\x1b_payload\x1b\\", "payload"],
  ["PM", "\x1b^payload\x1b\\", "payload"],
  ["SOS", "\x1bXpayload\x1b\\", "payload"],
  ["RIS (full reset)", "\x1bc", undefined],
  ["save cursor / charset", "\x1b7\x1b(0\x1b8", undefined],
  ["lone carriage return", "\r", undefined],
  ["backspaces", "\b\b\b\b\b\b", undefined],
  ["bell, NUL, DEL", "\x07\x00\x7f", undefined],
  ["C1 NEL and CSI-less C1", "\x85\x8d\x9a", undefined],
];

function everyLine(s: string): string[] {
  const e = (x: object) => ({ ...base, ...x }) as TranscriptEvent;
  const events: TranscriptEvent[] = [
    e({ type: "job_started", spec: { task: s, repo: { path: "/r" } } }),
    e({ type: "sandbox_ready", container: s, ms: 5 }),
    e({ type: "setup", command: s, exitCode: 0, outputTail: s, ms: 5 }),
    e({ type: "model_response", turn: 1, content: [], stopReason: s, usage, ms: 5, model: s }),
    e({ type: "model_retry", retry: 1, error: s }),
    e({ type: "tool_call", turn: 1, toolUseId: "t", name: "bash", input: { command: s } }),
    e({ type: "tool_call", turn: 1, toolUseId: "t", name: s, input: { command: s, path: s } }),
    e({ type: "tool_call", turn: 1, toolUseId: "t", name: "mcp__x__y", input: { q: s }, server: s }),
    e({ type: "tool_result", turn: 1, toolUseId: "t", name: "bash", output: s, isError: true, ms: 5 }),
    e({ type: "verify", command: s, exitCode: 1, outputTail: s, ms: 5 }),
    e({ type: "patch", filesChanged: [s], diffstat: s, bytes: 3 }),
    e({ type: "job_finished", status: "failed", error: s, costUsd: 0, turns: 1 }),
  ];
  const lines = events.map((ev) => formatEvent(ev, { verbose: true }));
  lines.push(
    formatEvent(e({ type: "tool_result", turn: 1, toolUseId: "t", name: "x", output: s, isError: false, ms: 5 }), {
      verbose: true,
    }),
  );
  return lines.filter((l): l is string => l !== undefined);
}

describe("formatEvent strips terminal control sequences", () => {
  it.each(PAYLOADS)("%s", (_name, payload, hidden) => {
    const hostile = `before${payload}after`;
    const lines = everyLine(hostile);
    expect(lines.length).toBeGreaterThan(10);
    for (const line of lines) {
      expect(line).not.toMatch(CONTROL);
      expect(line).not.toContain("\x1b");
      if (hidden) expect(line).not.toContain(hidden);
    }
    // The visible text around the sequence survives wherever the field is printed.
    const printed = lines.filter((l) => l.includes("before"));
    expect(printed.length).toBeGreaterThanOrEqual(8);
    for (const line of printed) expect(line).toMatch(/before ?after/);
  });

  it("all payloads at once, in the fields a run prints", () => {
    const all = PAYLOADS.map(([, p]) => `x${p}`).join("") + "END";
    for (const line of everyLine(all)) {
      expect(line).not.toMatch(CONTROL);
      expect(line).not.toContain("\x1b");
    }
  });

  it("a custom or MCP tool call shows its input as JSON, and the MCP server", () => {
    const call = (x: object) =>
      formatEvent({ ...base, type: "tool_call", turn: 1, toolUseId: "t", ...x } as TranscriptEvent);
    expect(call({ name: "mcp__docs__search", input: { q: "retry" }, server: "docs" })).toMatch(
      / mcp__docs__search \(MCP server docs\): \{"q":"retry"\}$/,
    );
    expect(call({ name: "run_tests", input: { filter: "a" } })).toMatch(/ run_tests: \{"filter":"a"\}$/);
  });

  it("keeps the exact visible text", () => {
    const ev = {
      ...base,
      type: "tool_result",
      turn: 1,
      toolUseId: "t",
      name: "bash",
      output: "ok \x1b[31mred\x1b[0m\x1b]0;pwned\x07 done\r\n\tnext",
      isError: true,
      ms: 5,
    } as TranscriptEvent;
    expect(formatEvent(ev)).toBe("12:34:56   ✗ ok red done next (5 ms)");
    const call = {
      ...base,
      type: "tool_call",
      turn: 1,
      toolUseId: "t",
      name: "str_replace_based_edit_tool",
      input: { command: "view", path: "/workspace/\x1b]52;c;SGVsbG8=\x07a.txt" },
    } as TranscriptEvent;
    expect(formatEvent(call)).toBe("12:34:56   str_replace_based_edit_tool: view /workspace/a.txt");
  });

  it("a long escape string does not use up the shortened line: it is removed before shortening", () => {
    const output = `\x1b]0;${"x".repeat(500)}\x07visible`;
    const ev = {
      ...base,
      type: "tool_result",
      turn: 1,
      toolUseId: "t",
      name: "bash",
      output,
      isError: true,
      ms: 5,
    } as TranscriptEvent;
    expect(formatEvent(ev)).toBe("12:34:56   ✗ visible (5 ms)");
  });

  it("shows bidi overrides as a visible placeholder instead of letting them reorder the line", () => {
    const ev = {
      ...base,
      type: "setup",
      command: "echo safe \u202e;)(hcteg\u202c \u2066x\u2069",
      exitCode: 0,
      outputTail: "",
      ms: 5,
    } as TranscriptEvent;
    const line = formatEvent(ev)!;
    expect(line).not.toMatch(BIDI);
    expect(line).toContain("echo safe \uFFFD;)(hcteg\uFFFD \uFFFDx\uFFFD");
  });
});

describe("an egress line", () => {
  const egress = (o: Record<string, unknown>) =>
    formatEvent({
      ...base,
      type: "egress",
      host: "registry.test",
      port: 443,
      method: "GET",
      allowed: true,
      bytesUp: 10,
      bytesDown: 2000,
      ms: 5,
      ...o,
    });

  it("names a terminated tunnel's request: its path, status and the credential added, by name", () => {
    expect(egress({ path: "/@corp%2fprivate-util", status: 200, credential: "npm-private" })).toMatch(
      /egress: GET registry\.test:443\/@corp%2fprivate-util allowed, 200, 10 B up \/ 2000 B down, credential npm-private added$/,
    );
    expect(egress({ method: "CONNECT" })).toMatch(
      /egress: CONNECT registry\.test:443 allowed, 10 B up \/ 2000 B down$/,
    );
    expect(
      egress({ allowed: false, reason: "the Host other.test is not the CONNECT host", credential: "npm-private" }),
    ).toMatch(/refused: the Host other\.test is not the CONNECT host \(credential not added\)$/);
  });
});

describe("safeText", () => {
  it("keeps newlines and tabs unless one line is asked for; CR never overwrites", () => {
    expect(safeText("a\tb\nc\r\nd\re")).toBe("a\tb\nc\nd\ne");
    expect(safeText("a\tb\nc\r\nd\re", { oneLine: true })).toBe("a b c d e");
  });

  it("removes whole sequences, not just the ESC", () => {
    expect(safeText("\x1b[1;31mred\x1b[0m \x1b]52;c;SGVsbG8=\x07\x1bP1$r\x1b\\\x9b2J\x9d0;t\x9cok")).toBe("red ok");
  });

  it("an unterminated string sequence loses its introducer; its text stays visible (as plain text)", () => {
    expect(safeText("a\x1b]0;title")).toBe("a0;title");
    expect(safeText("a\x9d0;title")).toBe("a0;title");
    expect(safeText("a\x1b")).toBe("a");
  });

  it("reads a long run of 8-bit string introducers once (each was a start scanned to the run's end)", () => {
    const run = "\x9d".repeat(512 * 1024);
    expect(safeText(`a${run}b`)).toBe("ab");
    expect(safeText(`a\x9d${"x".repeat(100)}\x9dtitle\x9cb`)).toBe(`a${"x".repeat(100)}b`);
  });

  it("leaves ordinary text, including non-ASCII, untouched", () => {
    const s = "héllo wörld → ✓ 😀 日本語 ~!@#$%^&*()[]{}\\|";
    expect(safeText(s)).toBe(s);
    expect(safeText(s, { oneLine: true })).toBe(s);
  });
});

describe("the worker's log lines", () => {
  // A job's error carries text from the repo, git or the model: an OSC 52 clipboard write, colours,
  // a carriage return over the line, a forged log line after a newline and an 8-bit CSI.
  const hostile =
    "failed: \x1b]52;c;cm0gLXJmIH4=\x07\x1b[31mred\x1b[0m\rover\n2026-01-01T00:00:00.000Z [worker forged] job 9 attempt 1: completed\x9b2J";

  it("a hostile text in a line drives no terminal and starts no line of its own", () => {
    const text: string[] = [];
    workerLogger("host:1", { write: (l) => text.push(l) })(hostile, { job: "7", level: "warn" });
    expect(text).toHaveLength(1);
    expect(text[0]!.endsWith("\n")).toBe(true);
    expect(text[0]!.slice(0, -1)).not.toMatch(CONTROL);
    expect(text[0]).not.toMatch(/cm0gLXJmIH4/);
    expect(text[0]).toMatch(
      / WARN job 7: failed: red over 2026-01-01T00:00:00.000Z \[worker forged\] job 9 attempt 1: completed\n$/,
    );
  });

  const jsonLine = () => {
    const json: string[] = [];
    workerLogger("host:1", { format: "json", write: (l) => json.push(l) })(hostile, { job: "7" });
    expect(json).toHaveLength(1);
    return json[0]!;
  };

  it("in JSON (--log-format json) C0 controls are JSON's escapes, and the text is kept whole", () => {
    expect(jsonLine().trimEnd()).not.toMatch(/[\x00-\x1f\x7f]/);
    expect(JSON.parse(jsonLine()).msg).toBe(hostile);
  });

  // JSON escapes C0 only: U+0080-U+009F would go out as they are, and a terminal that reads C1 in
  // UTF-8 (xterm can) takes U+009B for CSI. The logger writes them (and bidi overrides, line
  // separators) as JSON escapes: the value a collector parses is the same.
  it("in JSON a C1 control (U+009B, the 8-bit CSI) is written as its \\u escape", () => {
    expect(hostile).toMatch(/[\x80-\x9f]/);
    expect(jsonLine()).not.toMatch(/[\x80-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    expect(JSON.parse(jsonLine()).msg).toBe(hostile);
  });
});
