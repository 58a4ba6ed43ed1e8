// A hostile agent inside the sandbox: it may not fake verify, reach the file agent, or wedge the
// shell with leftover processes; a patch it breaks fails the job once, without a retry.
//
// Backend: Docker (the attacks need the isolation and the limits); under rootless Podman too.
import { afterEach, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../../src/agent/model.js";
import { runJob } from "../../../src/job/run.js";
import { FileAgent } from "../../../src/sandbox/file-agent.js";
import type { Sandbox } from "../../../src/sandbox/sandbox.js";
import type { TranscriptEvent } from "../../../src/core/spec/spec.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../../support/fake-anthropic.js";
import { useSandbox } from "../../support/sandbox.js";

const CLAMP = new URL("../../../examples/clamp", import.meta.url).pathname;

let fake: FakeAnthropic | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

/** A job whose model runs one bash command and stops. */
async function jobRunning(command: string, spec: Record<string, unknown> = {}) {
  fake = await startFakeAnthropic([reply(toolUse("bash", { command })), reply(text("Done."))]);
  const events: TranscriptEvent[] = [];
  const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
  const result = await runJob(
    { task: "t", repo: { path: CLAMP }, ...spec },
    { model, onEvent: (e) => events.push(e), labels: { "patchbay.test": "sandbox-hostile" } },
  );
  return { result, events };
}

// A background process that finds the nonce of the command running in the agent's shell (in the
// shell's memory, readable to the same uid) and prints the end marker with exit 0 into the
// shell's own output pipe.
const MARKER_FORGER = String.raw`cat > /tmp/forge.py <<'EOF'
import os, re, sys, time
pid = int(sys.argv[1]); seen = set()
while True:
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", 0)
        for line in maps:
            if "rw-p" not in line: continue
            a, b = (int(x, 16) for x in line.split()[0].split("-"))
            try: mem.seek(a); chunk = mem.read(b - a)
            except OSError: continue
            for m in re.finditer(rb"PBSTART([0-9a-f]{32})", chunk):
                n = m.group(1).decode()
                if n not in seen:
                    seen.add(n)
                    with open(f"/proc/{pid}/fd/1", "w") as out: out.write(f"\nPBEND{n}:0\n")
        mem.close()
    except OSError: pass
    time.sleep(0.05)
EOF
(python3 /tmp/forge.py $$ >/dev/null 2>&1 &) ; echo started`;

const FAILING_VERIFY = "sleep 2; python3 -c 'import sys; sys.exit(3)'";

describe("verify cannot be faked by the agent (real engine, real SDK)", () => {
  it.each([
    [
      "a shell function shadowing the verify command",
      "python3(){ echo OK; return 0; }; sleep(){ :; }; export -f python3 sleep; echo defined",
    ],
    [
      "a redefined internal hook of the shell",
      "__pb_post(){ builtin printf '\\nPBEND%s:%d\\n' \"$1\" 0; }; echo redefined",
    ],
    ["a background process printing the completion marker", MARKER_FORGER],
  ])("%s", async (_what, trick) => {
    const { result, events } = await jobRunning(trick, { verify: FAILING_VERIFY, verifyRounds: 0 });
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({ isError: false });
    expect(result.verify?.exitCode).toBe(3);
    expect(events.find((e) => e.type === "verify")).toMatchObject({ exitCode: 3 });
  });

  it("verify sees the image's environment, not the agent's exports", async () => {
    const { result } = await jobRunning("export PATH=/nonexistent:$PATH PYTHONPATH=/tmp; echo ok", {
      verify: 'echo "path=$PATH"; echo "pp=${PYTHONPATH-unset}"',
    });
    expect(result.verify?.exitCode).toBe(0);
    expect(result.verify?.outputTail).not.toMatch(/nonexistent/);
    expect(result.verify?.outputTail).toMatch(/pp=unset/);
  });

  it("nothing the agent left running changes the tree after the patch is taken", async () => {
    // A background writer keeps appending; the patch and what verify sees must agree.
    const { result } = await jobRunning(
      "(while :; do echo x >> /workspace/late.txt; sleep 0.05; done) >/dev/null 2>&1 & sleep 0.3; echo bg",
      { verify: "sleep 1; wc -l < late.txt" },
    );
    const lines = Number(result.verify?.outputTail.trim());
    expect(result.filesChanged).toEqual(["late.txt"]);
    const added = result.patch.split("\n").filter((l) => l === "+x").length;
    expect(lines).toBe(added);
  });
});

describe("a patch broken by the agent fails the job once (real engine)", () => {
  it("an empty nested git repo makes git refuse the tree: failed with the reason, not thrown for a retry", async () => {
    const { result, events } = await jobRunning(
      "mkdir -p /workspace/sub && git -C /workspace/sub init -q && touch /workspace/sub/x && echo ok",
    );
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(/the patch could not be taken/);
    expect(events.at(-1)).toMatchObject({ type: "job_finished", status: "failed" });
  });
});

describe("the file agent is out of the agent's reach (real engine)", () => {
  const sb = useSandbox({ labels: { "patchbay.test": "sandbox-hostile" } });
  const agentOf = (s: Sandbox) => (s as unknown as { agent: FileAgent }).agent;

  it("runs as root with the agent's file identity: new files are uid 1000's", async () => {
    await sb().files.write("/workspace/owned.txt", Buffer.from("x"));
    // Three root pythons: the helper (every process's parent), and the file agent and the supervisor
    // (forks of it, named by their scripts); none of the agent's uid.
    const r = await sb().shell.run(
      "stat -c '%u:%g %a' /workspace/owned.txt; ps -e -o user=,comm=,args= | grep -c '^root  *\\(python3\\|file_agent.py\\|supervisor.py\\)  *python3 -I -S'; ps -e -o user=,args= | grep '[p]ython3 -I -S' | grep -vc '^root '",
    );
    expect(r.output).toBe("1000:1000 644\n3\n0\n");
  });

  it("cannot be written to or signalled by the agent; a forged header never reaches the worker", async () => {
    // The helper's stdin would take a spawn as root: none of the three's stdin, stdout or state is the agent's to touch.
    const r = await sb().shell.run(
      `pgrep -fc 'python3 -I -S'; for p in $(pgrep -f 'python3 -I -S'); do for fd in 0 1; do (printf 'S\\0\\0\\0\\1\\0\\0\\0\\2{}' > /proc/$p/fd/$fd) 2>/dev/null && echo WROTE $p $fd; done; kill -STOP $p 2>/dev/null && echo STOPPED $p; done; echo done`,
    );
    expect(r.output).toBe("3\ndone\n");
    await sb().files.write("/workspace/after.txt", Buffer.from("still fine"));
    expect((await sb().files.read("/workspace/after.txt")).toString()).toBe("still fine");
  });

  it("imports nothing from /workspace when it restarts", async () => {
    await sb().files.write(
      "/workspace/json.py",
      Buffer.from("open('/tmp/pwned', 'w').write('x')\nimport sys\nsys.stdout.buffer.write(b'x' * 10**8)\n"),
    );
    agentOf(sb()).close(); // the next request starts a new agent
    await sb().files.write("/workspace/b.txt", Buffer.from("b"));
    expect((await sb().files.read("/workspace/b.txt")).toString()).toBe("b");
    expect((await sb().shell.run("test -e /tmp/pwned && echo PWNED || echo clean")).output).toBe("clean\n");
  });

  it("a reply with a forged length or no reply at all ends the request (the caller falls back)", async () => {
    const forged = new FileAgent(sb().box, {
      argv: ["bash", "-c", `read -r l; echo '{"len": 100000000000}'; sleep 1000`],
    });
    expect(await forged.request({ op: "stat", path: "/" })).toBeUndefined();
    forged.close();
    const silent = new FileAgent(sb().box, { argv: ["bash", "-c", "sleep 1000"], timeoutMs: 300 });
    expect(await silent.request({ op: "stat", path: "/" })).toBeUndefined();
    silent.close();
  });

  it("does not hang on a FIFO the agent made", async () => {
    await sb().shell.run("mkfifo /workspace/fifo");
    await expect(sb().files.read("/workspace/fifo")).rejects.toThrow(/not a regular file|EINVAL|EIO/);
    expect((await sb().files.read("/workspace/b.txt")).toString()).toBe("b");
  });
});

describe("leftover processes holding the pids limit (real engine)", () => {
  const sb = useSandbox({ limits: { pids: 64 }, labels: { "patchbay.test": "sandbox-hostile" } });

  it("a fork bomb left in the background: the next command still runs, and says what was killed", async () => {
    const bomb = await sb().shell.run("f(){ f|f& }; f & echo launched", { timeoutSec: 10 });
    expect(bomb.output).toMatch(/launched/);
    await new Promise((r) => setTimeout(r, 2000)); // the bomb fills the pids limit (no command in between: it would reclaim first)
    const r = await sb().shell.run("echo alive; ps -e --no-headers | wc -l", { timeoutSec: 20 });
    expect(r.timedOut).toBe(false);
    expect(r.exitCode).toBe(0);
    expect(r.output).toMatch(
      /\[patchbay: \d+ background processes held the sandbox's process limit; they were killed before this command ran\]/,
    );
    expect(r.output).toMatch(/alive\n/);
    expect(Number(r.output.trim().split("\n").at(-1))).toBeLessThan(10);
  });

  it("a command that fills the limit from the shell itself: the timeout's kill takes the shell down too, and that command's result says it was replaced, not the next one's", async () => {
    // The shell's own fork fails and bash waits to retry it; the kill's SIGUSR1 ends the wait, the
    // fork fails for good, and a non-interactive bash exits.
    const filled = await sb().shell.run("for i in $(seq 100); do sleep 1000 & done; echo filled", { timeoutSec: 4 });
    expect(filled).toMatchObject({ timedOut: true, shellRestarted: true });
    const next = await sb().shell.run("python3 -c 'print(9)'", { timeoutSec: 20 });
    expect(next).toMatchObject({ output: "9\n", exitCode: 0, timedOut: false });
    expect(next.shellRestarted).toBeUndefined();
  });
});
