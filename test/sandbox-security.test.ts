// The hardening, checked from inside a real container.
import { describe, expect, it } from "vitest";
import { useSandbox } from "./support/sandbox.js";

describe("sandbox hardening (real engine)", () => {
  const sb = useSandbox({ limits: { memoryMb: 512, pids: 128, diskMb: 64 } });

  it("has no network interface but lo", async () => {
    const r = await sb().shell.run("ls /sys/class/net");
    expect(r.output.trim().split("\n")).toEqual(["lo"]);
    const tcp = await sb().shell.run("timeout 3 bash -c 'echo > /dev/tcp/127.0.0.1/9' ; echo rc=$?");
    expect(tcp.output).toMatch(/rc=1/);
  });

  it("runs as uid 1000 with no capabilities and no new privileges", async () => {
    const r = await sb().shell.run("id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status");
    expect(r.output).toMatch(/^1000\n/);
    expect(r.output).toMatch(/CapEff:\s+0000000000000000/);
    expect(r.output).toMatch(/CapPrm:\s+0000000000000000/);
    expect(r.output).toMatch(/NoNewPrivs:\s+1/);
  });

  it("has a read-only root filesystem and a writable, bounded /tmp and /workspace", async () => {
    const r = await sb().shell.run("touch /etc/x; echo rc=$?; touch /tmp/x /workspace/x && echo writable");
    expect(r.output).toMatch(/Read-only file system/);
    expect(r.output).toMatch(/rc=1/);
    expect(r.output).toMatch(/writable/);
  });

  it("stops a fork bomb at the pids limit and still answers", async () => {
    // The loop after the bomb is a builtin of the shell itself: the timeout must kill the bomb and
    // then replace the stuck shell.
    const r = await sb().shell.run(":(){ :|:& };: ; while :; do sleep 1; done", { timeoutSec: 4 });
    expect(r.timedOut).toBe(true);
    expect(r.output).toMatch(/Resource temporarily unavailable|retry/);
    const after = await sb().shell.run("echo alive; ps -e --no-headers | wc -l");
    expect(after.output).toMatch(/^alive\n/);
    expect(Number(after.output.split("\n")[1])).toBeLessThan(10);
    const limit = await sb().shell.run("cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max");
    expect(limit.output.trim()).toBe("128");
  });

  it("kills a 4 GB allocation, reports it, and still answers", async () => {
    const r = await sb().shell.run("python3 -c \"b = bytearray(4 * 1024**3); b[::4096] = b'x' * (len(b) // 4096); print('survived')\"", { timeoutSec: 60 });
    expect(r.exitCode).toBe(137);
    expect(r.output).not.toMatch(/^survived$/m);
    expect(r.output).toMatch(/out of memory/);
    expect((await sb().shell.run("echo alive")).output).toBe("alive\n");
  });

  it("stops filling /workspace at its bound with ENOSPC", async () => {
    const r = await sb().shell.run("dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>&1; echo rc=$?; df -m /workspace | tail -1", { timeoutSec: 60 });
    expect(r.output).toMatch(/No space left on device/);
    expect(r.output).toMatch(/rc=1/);
    const size = await sb().shell.run("stat -c %s /workspace/fill; rm /workspace/fill");
    expect(Number(size.output.trim())).toBeLessThanOrEqual(64 * 1024 * 1024);
  });

  it("passes nothing of the worker's environment into the container", async () => {
    process.env.PATCHBAY_SECRET_CANARY = "canary-7f3a";
    const r = await sb().shell.run("env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'");
    expect(r.output).not.toMatch(/canary-7f3a/);
    expect(r.output).not.toMatch(/ANTHROPIC|REDIS_URL|DOCKER_HOST/);
    const probe = await sb().exec(["env"]);
    expect(probe.stdout.toString()).not.toMatch(/canary-7f3a/);
  });
});

describe("gVisor runtime (runsc, registered by scripts/services.sh)", () => {
  const sb = useSandbox({ runtime: "runsc" });

  it("runs the shell, files and timeouts under runsc", async () => {
    const k = await sb().shell.run("uname -r; id -u");
    expect(k.output).toMatch(/^4\.4\.0\n1000\n$/); // gVisor's synthetic kernel version
    await sb().shell.run("cd /tmp && export KEEP=1");
    const r = await sb().shell.run("sleep 100", { timeoutSec: 2 });
    expect(r.timedOut).toBe(true);
    expect((await sb().shell.run("pwd; echo $KEEP")).output).toBe("/tmp\n1\n");
    await sb().files.write("/workspace/g.txt", Buffer.from("gvisor\r\n"));
    expect((await sb().files.read("/workspace/g.txt")).toString()).toBe("gvisor\r\n");
  });
});
