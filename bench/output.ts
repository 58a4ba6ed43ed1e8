// The `output` row: a command that prints 150 MB through the agent's shell, against the same
// command with its output sent to /dev/null in the same shell (its time in the box alone) and
// read by a plain pipe reader in the box (`| cat >/dev/null`: what any reader of a pipe adds),
// under runc and under gVisor. The helper cuts the output in the box (py/helper.py's Cut), so the
// ratios are what reading and counting 150 MB in the box adds; the worker's own CPU beside them
// says that none of it crossed into the worker.
import { Sandbox } from "../src/sandbox/sandbox.js";
import { log, median, round } from "./lib.js";

const BYTES = 150_000_000;
const RUNS = Number(process.env["OUTPUT_RUNS"] ?? 5);

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
    await timed(sb, printed); // a warm-up of each: the pipe's first pages, the helper's code paths
    await timed(sb, alone);
    await timed(sb, piped);
    const p: Awaited<ReturnType<typeof timed>>[] = [];
    const a: Awaited<ReturnType<typeof timed>>[] = [];
    const c: Awaited<ReturnType<typeof timed>>[] = [];
    for (let i = 0; i < RUNS; i++) {
      p.push(await timed(sb, printed));
      a.push(await timed(sb, alone));
      c.push(await timed(sb, piped));
    }
    const printedMs = median(p.map((x) => x.ms));
    const aloneMs = median(a.map((x) => x.ms));
    const pipedMs = median(c.map((x) => x.ms));
    return {
      printed_ms: round(printedMs, 1),
      in_box_alone_ms: round(aloneMs, 1),
      in_box_piped_ms: round(pipedMs, 1),
      ratio_printed_of_alone: round(printedMs / aloneMs),
      ratio_printed_of_piped: round(printedMs / pipedMs),
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
