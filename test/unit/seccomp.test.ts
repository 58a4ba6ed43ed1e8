// The sandbox's seccomp profile as data (src/backend/seccomp.ts): what it denies, that it is
// Docker's default otherwise, its shape, and the file Podman is given. No engine: the behaviour in
// a box is test/integration/engines/sandbox-security.test.ts's (and sandbox-gvisor's under runsc).
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  DENIED,
  profileFile,
  PTRACE_CALLS,
  seccompOption,
  seccompProfile,
  type SeccompProfile,
} from "../../src/backend/seccomp.js";

/** Every name some rule allows, under whatever condition (arch, capability, arguments, kernel). */
const allowedAnyhow = (p: SeccompProfile) =>
  new Set(p.syscalls.filter((r) => r.action === "SCMP_ACT_ALLOW").flatMap((r) => r.names));
/** Names allowed with no condition at all. */
const allowedPlain = (p: SeccompProfile) =>
  new Set(
    p.syscalls
      .filter(
        (r) =>
          r.action === "SCMP_ACT_ALLOW" &&
          !r.args?.length &&
          !Object.keys(r.includes ?? {}).length &&
          !Object.keys(r.excludes ?? {}).length,
      )
      .flatMap((r) => r.names),
  );

const base = seccompProfile();
const traced = seccompProfile({ allowPtrace: true });

describe("the sandbox's seccomp profile", () => {
  it("denies ptrace, process_vm_readv/writev and their relatives under every condition, with EPERM", () => {
    expect(Object.keys(DENIED).sort()).toEqual([
      "io_uring_enter",
      "io_uring_register",
      "io_uring_setup",
      "kcmp",
      "perf_event_open",
      "pidfd_getfd",
      "process_madvise",
      "process_vm_readv",
      "process_vm_writev",
      "ptrace",
    ]);
    expect(base).toMatchObject({ defaultAction: "SCMP_ACT_ERRNO", defaultErrnoRet: 1 });
    const allowed = allowedAnyhow(base);
    expect(Object.keys(DENIED).filter((n) => allowed.has(n))).toEqual([]);
    // No rule names them at all (no capability- or arch-conditioned allow to fall into).
    expect(base.syscalls.flatMap((r) => r.names).filter((n) => n in DENIED)).toEqual([]);
  });

  it("PATCHBAY_ALLOW_PTRACE gives back ptrace and process_vm_readv/writev alone, as Docker's default has them (kernel 4.8 on)", () => {
    const more = [...allowedAnyhow(traced)].filter((n) => !allowedAnyhow(base).has(n)).sort();
    expect(more).toEqual([...PTRACE_CALLS].sort());
    expect(traced.syscalls.find((r) => r.names.includes("ptrace"))).toMatchObject({
      action: "SCMP_ACT_ALLOW",
      includes: { minKernel: "4.8" },
    });
    // The rest of DENIED stays denied.
    expect(
      Object.keys(DENIED)
        .filter((n) => allowedAnyhow(traced).has(n))
        .sort(),
    ).toEqual([...PTRACE_CALLS].sort());
    // Nothing else changes.
    expect(traced.syscalls.filter((r) => !r.names.includes("ptrace"))).toEqual(base.syscalls);
  });

  it("is Docker's default otherwise: its archMap, clone without namespace flags, clone3 ENOSYS, personality and socket filters, capability-conditioned calls", () => {
    expect(base.archMap[0]).toEqual({
      architecture: "SCMP_ARCH_X86_64",
      subArchitectures: ["SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    });
    expect(base.archMap.map((a) => a.architecture)).toEqual(
      expect.arrayContaining(["SCMP_ARCH_AARCH64", "SCMP_ARCH_S390X", "SCMP_ARCH_RISCV64"]),
    );
    const plain = allowedPlain(base);
    expect(plain.size).toBeGreaterThan(350);
    for (const n of [
      "read",
      "write",
      "openat",
      "execve",
      "fork",
      "vfork",
      "wait4",
      "kill",
      "mmap",
      "futex",
      "pidfd_open",
      "pidfd_send_signal",
      "setfsuid",
      "setuid",
    ])
      expect(plain.has(n), n).toBe(true);
    // What a container without capabilities must not reach, allowed (if at all) only with one.
    for (const n of [
      "mount",
      "umount2",
      "unshare",
      "setns",
      "bpf",
      "open_by_handle_at",
      "init_module",
      "reboot",
      "chroot",
      "keyctl",
      "add_key",
      "request_key",
      "userfaultfd",
      "clone",
      "clone3",
      "socket",
      "personality",
      "syslog",
      "acct",
      "swapon",
      "pivot_root",
    ])
      expect(plain.has(n), n).toBe(false);
    const rule = (name: string) => base.syscalls.filter((r) => r.names.includes(name));
    expect(rule("clone")).toContainEqual({
      names: ["clone"],
      action: "SCMP_ACT_ALLOW",
      args: [{ index: 0, value: 0x7e020000, op: "SCMP_CMP_MASKED_EQ" }],
      excludes: { caps: ["CAP_SYS_ADMIN"], arches: ["s390", "s390x"] },
    });
    expect(rule("clone3")).toContainEqual({
      names: ["clone3"],
      action: "SCMP_ACT_ERRNO",
      errnoRet: 38,
      excludes: { caps: ["CAP_SYS_ADMIN"] },
    });
    expect(rule("personality").map((r) => r.args![0]!.value)).toEqual([0, 8, 0x20000, 0x20008, 0xffffffff]);
    expect(rule("socket").map((r) => [r.args![0]!.op, r.args![0]!.value])).toEqual([
      ["SCMP_CMP_LT", 38],
      ["SCMP_CMP_EQ", 39],
      ["SCMP_CMP_GT", 40],
    ]);
    expect(rule("mount")).toEqual([expect.objectContaining({ includes: { caps: ["CAP_SYS_ADMIN"] } })]);
    expect(rule("open_by_handle_at")).toEqual([
      expect.objectContaining({ includes: { caps: ["CAP_DAC_READ_SEARCH"] } }),
    ]);
    expect(rule("arch_prctl")).toEqual([expect.objectContaining({ includes: { arches: ["amd64", "x32"] } })]);
  });

  it("denies at least what the stored default profile denies (containers-common's, Podman's own)", () => {
    // /usr/share/containers/seccomp.json comes with Podman (containers-common), which the engine matrix needs.
    const stored = JSON.parse(readFileSync("/usr/share/containers/seccomp.json", "utf8")) as SeccompProfile;
    const theirs = allowedAnyhow(stored);
    const theirsPlain = allowedPlain(stored);
    // Ours allows nothing the stored one never allows, but for calls newer than that file (2022).
    const newer = [
      "cachestat",
      "fchmodat2",
      "futex_requeue",
      "futex_wait",
      "futex_wake",
      "getxattrat",
      "listmount",
      "listxattrat",
      "map_shadow_stack",
      "mseal",
      "removexattrat",
      "riscv_hwprobe",
      "riscv_flush_icache",
      "setxattrat",
      "statmount",
      "uretprobe",
      "lsm_get_self_attr",
      "lsm_list_modules",
      "lsm_set_self_attr",
      "set_mempolicy_home_node",
      "swapcontext",
      "futex_waitv",
      "io_pgetevents",
      "io_pgetevents_time64",
      "vmsplice",
      "quotactl_fd",
      "mount_setattr",
    ];
    expect([...allowedAnyhow(base)].filter((n) => !theirs.has(n) && !newer.includes(n))).toEqual([]);
    // What it allows only on a condition, ours does not allow plainly.
    expect([...allowedPlain(base)].filter((n) => theirs.has(n) && !theirsPlain.has(n) && !newer.includes(n))).toEqual(
      [],
    );
    // And it allows ptrace and its relatives, which ours denies.
    expect(PTRACE_CALLS.every((n) => theirsPlain.has(n))).toBe(true);
  });

  it("is well-formed: names, actions, argument ops, and JSON that reads back the same", () => {
    for (const p of [base, traced]) {
      expect(JSON.parse(JSON.stringify(p))).toEqual(p);
      for (const r of p.syscalls) {
        expect(r.names.length).toBeGreaterThan(0);
        for (const n of r.names) expect(n).toMatch(/^[a-z_][a-z0-9_]*$/);
        expect(new Set(r.names).size).toBe(r.names.length);
        expect(["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO"]).toContain(r.action);
        for (const a of r.args ?? [])
          expect(["SCMP_CMP_EQ", "SCMP_CMP_LT", "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ"]).toContain(a.op);
      }
      expect(p.archMap.every((a) => /^SCMP_ARCH_[A-Z0-9_]+$/.test(a.architecture))).toBe(true);
    }
  });
});

describe("how an engine is given the profile", () => {
  const dirs: string[] = [];
  const tmp = () => {
    const d = mkdtempSync(join(tmpdir(), "pb-seccomp-"));
    dirs.push(d);
    return d;
  };
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it("Docker gets the profile's text; Podman a path to it (its compatible API opens the value as a file)", () => {
    const d = seccompOption("docker");
    expect(d.startsWith("seccomp={")).toBe(true);
    expect(JSON.parse(d.slice("seccomp=".length))).toEqual(base);
    const p = seccompOption("podman", { allowPtrace: true });
    expect(p).toMatch(/^seccomp=\/.*\/patchbay-seccomp-\d+\/[0-9a-f]{32}\.json$/);
    expect(JSON.parse(readFileSync(p.slice("seccomp=".length), "utf8"))).toEqual(traced);
  });

  it("the file is readable by the engine's user, in a directory only this uid writes, by its hash; a changed file is written again", () => {
    const base_ = tmp();
    const text = JSON.stringify(base);
    const f = profileFile(text, base_);
    expect(f).toBe(profileFile(text, base_));
    expect(statSync(f).mode & 0o777).toBe(0o644);
    expect(statSync(join(base_, `patchbay-seccomp-${process.getuid!()}`)).mode & 0o777).toBe(0o755);
    writeFileSync(f, "{}");
    expect(profileFile(text, base_)).toBe(f);
    expect(readFileSync(f, "utf8")).toBe(text);
    expect(profileFile(JSON.stringify(traced), base_)).not.toBe(f);
  });

  it("refuses a directory others can write (they could put another profile in its place)", () => {
    const base_ = tmp();
    const dir = join(base_, `patchbay-seccomp-${process.getuid!()}`);
    mkdirSync(dir);
    chmodSync(dir, 0o777);
    expect(() => profileFile("{}", base_)).toThrow(/is not a directory of uid \d+ that only it can write: remove it/);
  });
});
