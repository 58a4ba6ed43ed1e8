// The `output` row: a command that prints 150 MB through the agent's shell, against the same
// command with its output sent to /dev/null in the same shell (its time in the box alone) and
// read by a plain pipe reader in the box (`| cat >/dev/null`: what any reader of a pipe adds) and
// by one that copies nothing out of the pipe (splice(2) to /dev/null: what the writer's copies into
// a pipe cost whoever reads it), under runc and under gVisor. The helper cuts the output in the box (py/helper.py's Cut), so the
// ratios are what reading and counting 150 MB in the box adds; the worker's own CPU beside them
// says that none of it crossed into the worker.
import { Sandbox } from "../src/sandbox/sandbox.js";
import { log, median, round } from "./lib.js";

const BYTES = 150_000_000;
const RUNS = Number(process.env["OUTPUT_RUNS"] ?? 5);
// A pipe's reader that copies nothing out: the bytes go to /dev/null by splice(2) (python3's
// os.splice, 3.10 on), in the kernel; it fails unless it moved them all.
const SPLICE = [
  "import os, sys",
  'n, t = os.open("/dev/null", os.O_WRONLY), 0',
  "while k := os.splice(0, n, 1 << 20): t += k",
  `sys.exit(t != ${BYTES})`, // a runtime that ends the splice early is no figure
].join("\n");

async function timed(sb: Sandbox, command: string): Promise<{ ms: number; cpuMs: number; kept: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await sb.shell.run(command, { timeoutSec: 60 });
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (r.exitCode !== 0) throw new Error(`${command} exited ${r.exitCode}: ${r.output.slice(-300)}`);
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000, kept: Buffer.byteLength(r.output) };
}

async function row(runtime: "runc" | "runsc") {
  const sb = await Sandbox.create({ runtime, labels: { "patchbay.bench": "1" } });
  try {
    const printed = `yes | head -c ${BYTES}`;
    const alone = `yes | head -c ${BYTES} >/dev/null`;
    const piped = `yes | head -c ${BYTES} | cat >/dev/null`;
    const spliced = `yes | head -c ${BYTES} | python3 -I -S -c '${SPLICE}'`;
    await timed(sb, printed); // a warm-up of each: the pipe's first pages, the helper's code paths
    await timed(sb, alone);
    await timed(sb, piped);
    // gVisor's splice(2) from a pipe stops after 64 KiB: no such reader there (null).
    const splices = await timed(sb, spliced).then(
      () => true,
      () => false,
    );
    const p: Awaited<ReturnType<typeof timed>>[] = [];
    const a: Awaited<ReturnType<typeof timed>>[] = [];
    const c: Awaited<ReturnType<typeof timed>>[] = [];
    const z: Awaited<ReturnType<typeof timed>>[] = [];
    for (let i = 0; i < RUNS; i++) {
      p.push(await timed(sb, printed));
      a.push(await timed(sb, alone));
      c.push(await timed(sb, piped));
      if (splices) z.push(await timed(sb, spliced));
    }
    const printedMs = median(p.map((x) => x.ms));
    const aloneMs = median(a.map((x) => x.ms));
    const pipedMs = median(c.map((x) => x.ms));
    const splicedMs = splices ? median(z.map((x) => x.ms)) : undefined;
    return {
      printed_ms: round(printedMs, 1),
      in_box_alone_ms: round(aloneMs, 1),
      in_box_piped_ms: round(pipedMs, 1),
      in_box_spliced_ms: splicedMs === undefined ? null : round(splicedMs, 1),
      ratio_printed_of_alone: round(printedMs / aloneMs),
      ratio_printed_of_piped: round(printedMs / pipedMs),
      ratio_spliced_of_alone: splicedMs === undefined ? null : round(splicedMs / aloneMs),
      worker_cpu_ms_printed: round(median(p.map((x) => x.cpuMs)), 1),
      bytes_kept: p[0]!.kept,
    };
  } finally {
    await sb.destroy();
  }
}

export async function benchOutput() {
  log(`output: ${BYTES} bytes printed through the shell against the same to /dev/null, runc and runsc, ${RUNS} runs`);
  const out: Record<string, object> = { bytes: { printed: BYTES } };
  out["runc"] = await row("runc");
  try {
    out["runsc"] = await row("runsc");
  } catch (err) {
    out["runsc"] = { error: (err as Error).message.slice(0, 300) };
  }
  return out;
}
