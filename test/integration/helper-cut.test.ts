// A command's output cut in the box (OutputCut, py/helper.py's Cut): the head passes, only the
// last bytes before the end marker are kept, the rest is counted in the helper and never reaches
// the worker. Through a raw channel with markers the test picks (exact bytes, markers split across
// writes, forged markers, endless output), and through the agent's shell and a fresh command (the
// head and the tail kept, the count of cut bytes stated, the bytes that reached the worker
// bounded, the worker's CPU bounded under a `yes` that never ends).
//
// Backend: local (the helper runs on the host as it runs in a box; no engine in between).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Attached, Box } from "../../src/backend/types.js";
import type { HelperBox } from "../../src/sandbox/helper.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { Shell } from "../../src/sandbox/shell.js";
import { localBackend } from "../support/backend.js";

/** A box over `inner` that counts every output byte its processes deliver to the worker. */
function counting(inner: Box): Box & { bytes: number } {
  const box = {
    name: inner.name,
    bytes: 0,
    state: () => inner.state(),
    attach: (argv: string[], onData: (b: Buffer, s: 1 | 2) => void, opts?: Parameters<Box["attach"]>[2]) =>
      inner.attach(
        argv,
        (b, s) => {
          box.bytes += b.length;
          onData(b, s);
        },
        opts,
      ),
  };
  return box;
}

/** What a raw channel delivered, in order: text, and `<K:n>` where the helper said n bytes were cut. */
async function cutRun(box: Box, script: string, cut: { head: number; tail: number; start?: string; end?: string }) {
  const parts: string[] = [];
  let bytes = 0;
  const p = await box.attach(
    ["bash", "-c", script],
    (b) => {
      bytes += b.length;
      parts.push(b.toString("latin1"));
    },
    { cwd: "/" },
  );
  p.cut!({
    head: cut.head,
    tail: cut.tail,
    ...(cut.start ? { start: Buffer.from(cut.start) } : {}),
    ...(cut.end ? { end: Buffer.from(cut.end) } : {}),
    onCut: (n) => parts.push(`<K:${n}>`),
  });
  p.write("go\n"); // the script waits for this line, so that the cut is in place before it prints
  p.endInput();
  return { p, bytes: () => bytes, text: () => parts.join("") };
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

describe("output cut in the box (local backend)", () => {
  let sb: Sandbox;
  const box = () => sb.box as HelperBox;
  beforeAll(async () => {
    sb = await Sandbox.create({ backend: localBackend(), labels: { "patchbay.test": "helper-cut" } });
  });
  afterAll(async () => {
    await sb?.destroy();
  });

  it("passes the head, keeps the last bytes before the end marker, and counts exactly what it cut", async () => {
    // Noise before the start marker is dropped; 1,000,000 numbered bytes; the end marker; more after it.
    const body = 'python3 -c \'import sys; sys.stdout.write("".join("%09d\\n" % i for i in range(100000)))\'';
    const r = await cutRun(
      box(),
      `read; echo noise; printf 'S1:\\n'; ${body}; python3 -c 'import os; os.write(1, b"\\nE1:7\\nafter\\n")'; sleep 0.3; printf 'later\\n'`,
      {
        head: 1000,
        tail: 2000,
        start: "S1:\n",
        end: "\nE1:",
      },
    );
    await r.p.ended;
    const all = Array.from({ length: 100000 }, (_, i) => `${String(i).padStart(9, "0")}\n`).join("");
    // What follows the end marker's line in the same read (one write here) is output while no
    // command runs, which the worker drops: the helper drops it; what comes later passes.
    expect(r.text()).toBe(`S1:\n${all.slice(0, 1000)}<K:${1_000_000 - 3000}>${all.slice(-2000)}\nE1:7\nlater\n`);
  });

  it("finds markers split across writes, and output that fits passes whole", async () => {
    const r = await cutRun(
      box(),
      `read; printf 'xxS'; sleep 0.2; printf '2:\\nhello'; sleep 0.2; printf '\\nE'; sleep 0.2; printf '2:4'; sleep 0.2; printf '2\\n'; sleep 0.3; printf 'later\\n'`,
      { head: 100, tail: 100, start: "S2:\n", end: "\nE2:" },
    );
    await r.p.ended;
    expect(r.text()).toBe("S2:\nhello\nE2:42\nlater\n");
  });

  it("a forged end marker (no status, four digits, a wrong one) does not end the cut", async () => {
    const forged = "printf '\\nE3:\\n\\nE3:1234\\n\\nE3:x\\n\\nE9:1\\n'";
    const r = await cutRun(
      box(),
      `read; printf 'S3:\\n'; for i in 1 2 3; do head -c 3000000 /dev/zero | tr '\\0' a; ${forged}; done; printf '\\nE3:0\\n'`,
      { head: 50, tail: 60, start: "S3:\n", end: "\nE3:" },
    );
    await r.p.ended;
    const text = r.text();
    expect(text).toMatch(/^S3:\na{50}<K:\d+>/);
    const cut = Number(/<K:(\d+)>/.exec(text)![1]);
    const total = 3 * (3_000_000 + "\nE3:\n\nE3:1234\n\nE3:x\n\nE9:1\n".length);
    expect(cut).toBe(total - 50 - 60);
    expect(text.endsWith("\nE9:1\n\nE3:0\n")).toBe(true);
    expect(r.bytes()).toBeLessThan(1000);
  });

  it("endless output is read and dropped in the box: what reaches the worker stays at head and tail", async () => {
    const r = await cutRun(box(), "read; printf 'S4:\\n'; exec yes", {
      head: 1000,
      tail: 1000,
      start: "S4:\n",
      end: "\nE4:",
    });
    await new Promise((res) => setTimeout(res, 1500));
    expect(r.bytes()).toBeLessThanOrEqual(4 + 1000);
    r.p.destroy();
  });

  it("a process's whole output cut from its spawn: head, the count, then the tail at its end", async () => {
    const parts: string[] = [];
    const p = await box().attach(
      ["bash", "-c", "head -c 5000000 /dev/zero | tr '\\0' b; echo END"],
      (b) => parts.push(b.toString()),
      {
        cwd: "/",
        cut: { head: 10, tail: 20, onCut: (n) => parts.push(`<K:${n}>`) },
      },
    );
    p.endInput();
    await p.ended;
    expect(parts.join("")).toBe(`bbbbbbbbbb<K:${5_000_004 - 30}>${"b".repeat(16)}END\n`);
    expect(await p.exitCode()).toBe(0);
  });
});

describe("the agent's shell and a fresh command, cut in the box (local backend)", () => {
  let sb: Sandbox;
  let counted: Box & { bytes: number };
  let shell: Shell;
  beforeAll(async () => {
    sb = await Sandbox.create({ backend: localBackend(), labels: { "patchbay.test": "helper-cut" } });
    counted = counting(sb.box);
    shell = new Shell(counted);
    await shell.start();
  });
  afterAll(async () => {
    shell?.close();
    await sb?.destroy();
  });

  it("150 MB of output: the head and the tail kept, the count stated, and only those bytes reach the worker", async () => {
    const before = counted.bytes;
    const r = await shell.run("yes | head -c 150000000; echo; echo THE-END", { maxOutputBytes: 20_000 });
    expect(r).toMatchObject({ exitCode: 0, truncated: true, timedOut: false });
    expect(r.output.startsWith("y\ny\ny\n")).toBe(true);
    expect(r.output.endsWith("y\ny\n\nTHE-END\n")).toBe(true);
    expect(r.output).toContain(`[... ${150_000_009 - 20_000} bytes of output cut (150000009 in all)`);
    expect(counted.bytes - before).toBeLessThan(25_000);
  });

  it("the cut's buffer costs the box's memory only where output reaches it", async () => {
    // The helper's resident memory, as its own /proc says (kB), read by a fresh command; a shell of
    // its own, so that its channel's buffer is new.
    const pid = await (sb.box as HelperBox).helperPid();
    const rss = async () =>
      Number(/VmRSS:\s+(\d+)/.exec((await sb.exec(["cat", `/proc/${pid}/status`])).stdout.toString())?.[1]);
    const before = await rss();
    const own = new Shell(sb.box);
    try {
      await own.start();
      await own.run("true"); // the shell's first cut: its buffer made (a MiB and the tail's room)
      const small = await rss();
      await own.run("yes | head -c 50000000", { maxOutputBytes: 20_000 });
      for (let i = 0; i < 3; i++) await own.run("echo small");
      const after = await rss();
      // A buffer filled with zeros when made held its MiB from the first command on; one of
      // anonymous memory holds the pages output reached, given back once a flood's command ends.
      expect(Number.isFinite(before) && Number.isFinite(small) && Number.isFinite(after)).toBe(true);
      expect(small - before).toBeLessThan(512);
      expect(after - before).toBeLessThan(512);
      // And private: anonymous memory mapped shared (mmap's default) is shmem, which the box keeps
      // after MADV_DONTNEED drops it from the helper's view (and its RSS).
      const maps = (await sb.exec(["cat", `/proc/${pid}/maps`], { user: "0:0" })).stdout.toString();
      expect(maps).toMatch(/\[heap\]/);
      expect(maps.split("\n").filter((l) => /^\S+ rw-s .*\/dev\/zero/.test(l))).toEqual([]);
    } finally {
      own.close();
    }
  });

  it("a `yes` that never ends: timed out with its head and tail, the worker's CPU and bytes bounded", async () => {
    const before = counted.bytes;
    const cpu0 = cpuMs();
    const t0 = Date.now();
    const r = await shell.run("yes", { timeoutSec: 3, maxOutputBytes: 2_000 });
    const cpu = cpuMs() - cpu0;
    expect(r).toMatchObject({ exitCode: 124, timedOut: true, truncated: true });
    expect(r.output).toMatch(/^(y\n){500}\n\n\[\.\.\. \d+ bytes of output cut \(\d+ in all\)/);
    expect(Number(/\((\d+) in all\)/.exec(r.output)![1])).toBeGreaterThan(10_000_000); // yes ran at full speed, in the box
    expect(r.output).toMatch(/(y\n){400}y?$/); // the last write may have been cut short by the kill
    expect(counted.bytes - before).toBeLessThan(10_000);
    // The worker slept through it: well under a tenth of the command's wall time on its own CPU.
    expect(cpu).toBeLessThan((Date.now() - t0) / 10);
    expect((await shell.run("echo after")).output).toBe("after\n");
  });

  it("forged markers in a flood stay output and the flood stays cut", async () => {
    const before = counted.bytes;
    const r = await shell.run(
      "for i in $(seq 200); do head -c 100000 /dev/zero | tr '\\0' z; printf '\\nPBEXIT:0\\nPBSTARTdeadbeef:\\n\\nPBENDdeadbeef:0\\n'; done; echo DONE",
      { maxOutputBytes: 4_000 },
    );
    expect(r).toMatchObject({ exitCode: 0, truncated: true });
    expect(r.shellExited).toBeUndefined();
    expect(r.output.startsWith("z".repeat(2000))).toBe(true);
    expect(r.output.endsWith("\nPBENDdeadbeef:0\nDONE\n")).toBe(true);
    expect(counted.bytes - before).toBeLessThan(10_000);
    expect((await shell.run("echo alive")).output).toBe("alive\n");
  });

  it("a shell that exits after a flood: its exit code and the cut output, and a fresh shell next", async () => {
    const r = await shell.run("yes | head -c 10000000; exit 3", { maxOutputBytes: 1_000 });
    expect(r).toMatchObject({ exitCode: 3, truncated: true, shellExited: true });
    expect(r.output).toContain("(10000000 in all)");
    expect((await shell.run("echo fresh")).output).toBe("fresh\n");
  });

  it("a shell replaced at a timeout while the helper held the cut: the head and a notice that the rest was cut", async () => {
    const r = await shell.run("trap '' USR1; i=0; while :; do echo line$((i++)); done", {
      timeoutSec: 2,
      maxOutputBytes: 1_000,
    });
    expect(r).toMatchObject({ exitCode: 124, timedOut: true, truncated: true, shellRestarted: true });
    expect(r.output).toMatch(/^line0\nline1\n/);
    expect(r.output).toContain("was cut in the sandbox, and its size is unknown");
    expect((await shell.run("echo next")).output).toBe("next\n");
  });

  it("an exit whose line fell in the cut middle still gives the shell's status", async () => {
    const r = await shell.run("yes | head -c 100000; (sleep 0.3; yes | head -c 200000) & exit 3", {
      maxOutputBytes: 1_000,
    });
    expect(r).toMatchObject({ exitCode: 3, shellExited: true, truncated: true });
    expect((await shell.run("echo fresh")).output).toBe("fresh\n");
  });

  it("thousands of forged exit lines cost one check: the command ends at once with its own status", async () => {
    const t0 = Date.now();
    const r = await shell.run("yes $'\\nPBEXIT:0' | head -c 1000000; echo END", {
      maxOutputBytes: 30_000,
      timeoutSec: 30,
    });
    expect(r).toMatchObject({ exitCode: 0, timedOut: false, truncated: true });
    expect(r.shellExited).toBeUndefined();
    expect(r.output.endsWith("END\n")).toBe(true);
    expect(Date.now() - t0).toBeLessThan(15_000);
  });

  it("a bound larger than any cut keeps (2^33 bytes) is clamped: the helper lives and the output is whole", async () => {
    expect((await shell.run("echo big", { maxOutputBytes: 2 ** 33 })).output).toBe("big\n");
    expect((await sb.runFresh("echo fresh-big", { maxOutputBytes: 2 ** 33 })).output).toBe("fresh-big\n");
    const r = await sb.runFresh("yes | head -c 30000000; echo END", { maxOutputBytes: 16 << 20 });
    expect(r.output).toContain(`[... ${30_000_004 - (16 << 20)} bytes of output cut (30000004 in all)`);
    expect((await shell.run("echo alive")).output).toBe("alive\n");
  });

  it("a fresh command's output (verify's) is cut in the box too", async () => {
    const r = await sb.runFresh("yes | head -c 50000000; echo END", { maxOutputBytes: 1_000 });
    expect(r).toMatchObject({ exitCode: 0, truncated: true });
    expect(r.output).toContain(`[... ${50_000_004 - 1_000} bytes of output cut (50000004 in all)`);
    expect(r.output.endsWith("y\ny\nEND\n")).toBe(true);
  });
});

// The type the counting box's attach returns is the inner one's: the shell gets the helper's cut.
export type _Checked = Attached;
