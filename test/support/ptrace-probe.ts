// A probe the agent runs in a sandbox: python3 with ctypes tries what the seccomp profile
// (src/backend/seccomp.ts) denies against other processes of its uid, and prints one JSON line of
// what each call gave ("ok" or the errno's name). Its arguments: the pid to attach to (a sibling,
// stopped and released again), then the pid to seize and read (the agent's shell, never stopped).
import type { Sandbox } from "../../src/sandbox/sandbox.js";

export const PTRACE_PROBE = String.raw`
import ctypes, errno, json, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"x86_64": dict(ptrace=101, process_vm_readv=310, process_vm_writev=311, kcmp=312, perf_event_open=298, pidfd_open=434, pidfd_getfd=438, io_uring_setup=425),
      "aarch64": dict(ptrace=117, process_vm_readv=270, process_vm_writev=271, kcmp=272, perf_event_open=241, pidfd_open=434, pidfd_getfd=438, io_uring_setup=425)}[platform.machine()]
PTRACE_ATTACH, PTRACE_DETACH, PTRACE_SEIZE = 16, 17, 0x4206
out = {}
def call(name, *args):
    r = libc.syscall(NR[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())) if r < 0 else "ok")
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
sibling, shell = int(sys.argv[1]), int(sys.argv[2])
target = open("/proc/%d/cmdline" % sibling, "rb").read().replace(b"\0", b" ").decode().strip()
r, out["attach"] = call("ptrace", PTRACE_ATTACH, sibling, 0, 0)
if r == 0:
    os.waitpid(sibling, 0x40000000)  # __WALL: its stop
    call("ptrace", PTRACE_DETACH, sibling, 0, 0)
r, out["seize"] = call("ptrace", PTRACE_SEIZE, shell, 0, 0)
start = int(open("/proc/%d/maps" % shell).readline().split("-")[0], 16)
buf = ctypes.create_string_buffer(16)
local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 16), iovec(start, 16)
r, out["process_vm_readv"] = call("process_vm_readv", shell, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
mine = ctypes.create_string_buffer(16)
remote = iovec(ctypes.cast(mine, ctypes.c_void_p), 16)
r, out["process_vm_writev"] = call("process_vm_writev", os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
pidfd, out["pidfd_open"] = call("pidfd_open", shell, 0)
r, out["pidfd_getfd"] = call("pidfd_getfd", pidfd if pidfd >= 0 else 0, 0, 0)
r, out["kcmp"] = call("kcmp", os.getpid(), shell, 0, 0, 0)  # KCMP_FILE, fd 0 of each
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (1).to_bytes(4, "little") + (128).to_bytes(4, "little"), 8)  # PERF_TYPE_SOFTWARE, its size; config 0: cpu-clock
r, out["perf_event_open"] = call("perf_event_open", attr, shell, -1, -1, 0)
params = ctypes.create_string_buffer(120)
r, out["io_uring_setup"] = call("io_uring_setup", 1, params)
print("PROBE " + json.dumps(out))
print("TARGET " + target)
`;

/** What each call gave: "ok" or an errno's name (EPERM: the profile's). */
export type ProbeResult = Record<
  | "attach"
  | "seize"
  | "process_vm_readv"
  | "process_vm_writev"
  | "pidfd_open"
  | "pidfd_getfd"
  | "kcmp"
  | "perf_event_open"
  | "io_uring_setup",
  string
>;

/**
 * The bash that runs the probe as the agent: it attaches to `sibling` (a shell expression for a pid;
 * default a `sleep` of its own) and seizes and reads the shell itself ($$).
 */
export function probeCommand(sibling?: string): string {
  const write = `cat > /tmp/ptrace-probe.py <<'PY'\n${PTRACE_PROBE}\nPY\n`;
  return sibling
    ? `${write}python3 /tmp/ptrace-probe.py ${sibling} $$`
    : `${write}sleep 300 & S=$!; python3 /tmp/ptrace-probe.py $S $$; kill $S`;
}

export function probeResult(output: string): ProbeResult {
  const line = /^PROBE (\{.*\})$/m.exec(output);
  if (!line) throw new Error(`the ptrace probe printed no result:\n${output}`);
  return JSON.parse(line[1]!) as ProbeResult;
}

/** The command line of the process the probe attached to. */
export const probeTarget = (output: string): string | undefined => /^TARGET (.*)$/m.exec(output)?.[1];

/** Runs the probe in the agent's shell of `sb`. */
export async function probe(sb: Sandbox): Promise<ProbeResult> {
  return probeResult((await sb.shell.run(probeCommand(), { timeoutSec: 60 })).output);
}

// A probe the agent runs against /proc, which needs no syscall the seccomp profile denies: it opens
// /proc/PID/mem of a process for reading (and reads 16 bytes at its first mapping) and for writing,
// and reads /proc/PID/environ, first of `sibling` (a process another spawn started), then of a
// `sleep` of its own. One JSON line: each open's "ok" or its errno's name.
export const PROC_PROBE = String.raw`
import errno, json, os, subprocess, sys, time
def tries(pid):
    out = {}
    for name, flags in (("mem_read", os.O_RDONLY), ("mem_write", os.O_WRONLY)):
        try:
            fd = os.open("/proc/%d/mem" % pid, flags)
            try:
                if flags == os.O_RDONLY: os.pread(fd, 16, int(open("/proc/%d/maps" % pid).readline().split("-")[0], 16))
            finally: os.close(fd)
            out[name] = "ok"
        except OSError as e: out[name] = errno.errorcode.get(e.errno, str(e.errno))
    try:
        open("/proc/%d/environ" % pid, "rb").read(); out["environ"] = "ok"
    except OSError as e: out["environ"] = errno.errorcode.get(e.errno, str(e.errno))
    return out
own = subprocess.Popen(["sleep", "300"]); time.sleep(0.2)
print("PROC " + json.dumps({"sibling": tries(int(sys.argv[1])), "own_child": tries(own.pid)}))
own.kill()
`;

export interface ProcProbe {
  sibling: Record<"mem_read" | "mem_write" | "environ", string>;
  own_child: Record<"mem_read" | "mem_write" | "environ", string>;
}

/** The bash that runs PROC_PROBE as the agent against `sibling` (a shell expression for a pid). */
export function procProbeCommand(sibling: string): string {
  return `cat > /tmp/proc-probe.py <<'PY'\n${PROC_PROBE}\nPY\npython3 /tmp/proc-probe.py ${sibling}`;
}

export function procProbeResult(output: string): ProcProbe {
  const line = /^PROC (\{.*\})$/m.exec(output);
  if (!line) throw new Error(`the /proc probe printed no result:\n${output}`);
  return JSON.parse(line[1]!) as ProcProbe;
}

/**
 * Starts a sibling of the agent's shell on its own spawn (as an MCP server is: the agent's uid,
 * another channel of the helper) and runs PROC_PROBE against it from the agent's shell.
 */
export async function procProbe(sb: Sandbox): Promise<ProcProbe> {
  const marker = `pb-sibling-${process.pid}-${Date.now()}`;
  const sibling = await sb.spawn(["python3", "-c", "import time; time.sleep(300)", marker], () => {}, {
    env: ["SIBLING_SECRET=s3cret"],
  });
  try {
    // The spawn returns before its process has exec'd: wait (up to 10 s) until pgrep sees it.
    const wait = `for i in $(seq 100); do pgrep -f ${marker} >/dev/null && break; sleep 0.1; done\n`;
    return procProbeResult(
      (await sb.shell.run(`${wait}${procProbeCommand(`$(pgrep -f ${marker} | head -1)`)}`, { timeoutSec: 60 })).output,
    );
  } finally {
    sibling.destroy();
  }
}
