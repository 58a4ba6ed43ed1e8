// The seccomp profile of every box the Docker backend makes (docker.ts): Docker's default profile
// (moby's profiles/seccomp/default.json, the current one) written out here as patchbay's own data,
// less the system calls by which one process reads or drives another's memory, registers or file
// descriptors. Every process of a job runs as the same uid (the agent's shell, a spec's MCP servers,
// setup and verify commands, the file agent's children), and a kernel lets a process trace any
// process of its own uid: without this profile the model's shell could attach to an MCP server and
// read its memory or take over its output. The worker's PATCHBAY_ALLOW_PTRACE=1 gives back ptrace
// and process_vm_readv/writev (what strace and gdb need, and what Docker's default allows) for
// workers that run trusted repos; nothing else in DENIED ever comes back.
//
// Docker reads the profile's format (a filter over an allow-list, default EPERM, with entries that
// hold only on some architectures or with some capabilities) and turns it into the OCI spec's
// seccomp section; Podman reads the same format from a file (see seccompOption). A syscall name
// the host's libseccomp does not know is skipped by runc, so the list may name newer calls.
import { createHash } from "node:crypto";
import { chmodSync, lstatSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Given back by PATCHBAY_ALLOW_PTRACE=1: Docker's default allows these three (on kernels from 4.8, where seccomp holds under ptrace). */
export const PTRACE_CALLS = ["ptrace", "process_vm_readv", "process_vm_writev"] as const;

/**
 * What no box may call (EPERM, the profile's default action), and why. Docker's default already
 * allows the last six only to a container with a capability patchbay never grants (SYS_PTRACE,
 * SYS_ADMIN, PERFMON), and io_uring to none since Docker 25: they are named here so that no
 * capability-conditioned entry ever allows them.
 */
export const DENIED: Readonly<Record<string, string>> = {
  ptrace:
    "attaches to another process of the same uid: reads and writes its memory and registers, injects code (the agent's shell into an MCP server or a verify command)",
  process_vm_readv: "reads another process's memory with no attach (its secrets, an MCP server's tokens)",
  process_vm_writev: "writes another process's memory with no attach (takes over what it runs)",
  pidfd_getfd: "copies a file descriptor out of another process (an MCP server's pipes or sockets)",
  kcmp: "compares kernel objects of two processes (which files, memory or fds they share): a probe of another process's state, needed only by checkpoint tools",
  process_madvise: "advises on another process's memory (pages it out or in): a side channel on its working set",
  perf_event_open:
    "samples another process's registers, stacks and branches (and the kernel's): a read of its state and an old source of kernel bugs",
  io_uring_setup:
    "io_uring: system calls done by the kernel on the process's behalf, out of seccomp's sight, and a rich source of kernel exploits (Docker's default denies it since 25.0)",
  io_uring_enter: "io_uring (see io_uring_setup)",
  io_uring_register: "io_uring (see io_uring_setup)",
};

/**
 * Allowed to every process, unconditionally (Docker's default list; sorted). None of DENIED is
 * here; the socket and personality calls are allowed with argument filters below.
 */
const ALLOWED =
  `accept accept4 access adjtimex alarm bind brk cachestat capget capset chdir chmod chown chown32 clock_adjtime
clock_adjtime64 clock_getres clock_getres_time64 clock_gettime clock_gettime64 clock_nanosleep
clock_nanosleep_time64 close close_range connect copy_file_range creat dup dup2 dup3 epoll_create
epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old eventfd eventfd2
execve execveat exit exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir
fchmod fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fork
fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64 futex
futex_requeue futex_time64 futex_wait futex_waitv futex_wake futimesat get_robust_list get_thread_area getcpu
getcwd getdents getdents64 getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32 getitimer
getpeername getpgid getpgrp getpid getppid getpriority getrandom getresgid getresgid32 getresuid getresuid32
getrlimit getrusage getsid getsockname getsockopt gettid gettimeofday getuid getuid32 getxattr getxattrat
inotify_add_watch inotify_init inotify_init1 inotify_rm_watch io_cancel io_destroy io_getevents io_pgetevents
io_pgetevents_time64 io_setup io_submit ioctl ioprio_get ioprio_set ipc kill landlock_add_rule
landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr link linkat listen listmount
listxattr listxattrat llistxattr _llseek lremovexattr lseek lsetxattr lstat lstat64 madvise map_shadow_stack
membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap mmap2
mprotect mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 mq_timedsend
mq_timedsend_time64 mq_unlink mremap mseal msgctl msgget msgrcv msgsnd msync munlock munlockall munmap
name_to_handle_at nanosleep newfstatat _newselect open openat openat2 pause pidfd_open pidfd_send_signal pipe
pipe2 pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv preadv2 prlimit64
process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv
recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages removexattr removexattrat rename renameat
renameat2 restart_syscall riscv_hwprobe rmdir rseq rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo
rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_get_priority_max
sched_get_priority_min sched_getaffinity sched_getattr sched_getparam sched_getscheduler sched_rr_get_interval
sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam sched_setscheduler sched_yield
seccomp select semctl semget semop semtimedop semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg
sendto set_robust_list set_thread_area set_tid_address setfsgid setfsgid32 setfsuid setfsuid32 setgid setgid32
setgroups setgroups32 setitimer setpgid setpriority setregid setregid32 setresgid setresgid32 setresuid
setresuid32 setreuid setreuid32 setrlimit setsid setsockopt setuid setuid32 setxattr setxattrat shmat shmctl
shmdt shmget shutdown sigaltstack signalfd signalfd4 sigprocmask sigreturn socketcall socketpair splice stat
stat64 statfs statfs64 statmount statx symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time
timer_create timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64
timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times tkill truncate
truncate64 ugetrlimit umask uname unlink unlinkat uretprobe utime utimensat utimensat_time64 utimes vfork
vmsplice wait4 waitid waitpid write writev`.split(/\s+/);

/** Allowed only to a container with one of these capabilities (Docker's conditioned entries, less DENIED). patchbay's boxes hold none of them. */
const BY_CAPABILITY: [string, string[]][] = [
  ["CAP_DAC_READ_SEARCH", ["open_by_handle_at"]],
  [
    "CAP_SYS_ADMIN",
    "bpf clone clone3 fanotify_init fsconfig fsmount fsopen fspick lookup_dcookie lsm_get_self_attr lsm_list_modules lsm_set_self_attr mount mount_setattr move_mount open_tree quotactl quotactl_fd setdomainname sethostname setns syslog umount umount2 unshare".split(
      " ",
    ),
  ],
  ["CAP_SYS_BOOT", ["reboot"]],
  ["CAP_SYS_CHROOT", ["chroot"]],
  ["CAP_SYS_MODULE", ["delete_module", "init_module", "finit_module"]],
  ["CAP_SYS_PACCT", ["acct"]],
  ["CAP_SYS_RAWIO", ["iopl", "ioperm"]],
  ["CAP_SYS_TIME", ["settimeofday", "stime", "clock_settime", "clock_settime64"]],
  ["CAP_SYS_TTY_CONFIG", ["vhangup"]],
  ["CAP_SYS_NICE", ["get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"]],
  ["CAP_SYSLOG", ["syslog"]],
  ["CAP_BPF", ["bpf"]],
];

/** Allowed on these architectures only (Docker's names for them). */
const BY_ARCH: [string[], string[]][] = [
  [["ppc64le"], ["sync_file_range2", "swapcontext"]],
  [
    ["arm", "arm64"],
    ["arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls"],
  ],
  [["amd64", "x32"], ["arch_prctl"]],
  [["amd64", "x32", "x86"], ["modify_ldt"]],
  [
    ["s390", "s390x"],
    ["s390_pci_mmio_read", "s390_pci_mmio_write", "s390_runtime_instr"],
  ],
  [["riscv64"], ["riscv_flush_icache"]],
];

/** The namespace flags of clone (CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET): a clone with none of them is a plain fork or thread. */
const CLONE_NS_FLAGS = 0x7e020000;
/** socket's address families denied: AF_ALG (38, the kernel's crypto API) and AF_VSOCK (40, to the hypervisor). */
const AF_ALG = 38;
const AF_VSOCK = 40;
/** personality values allowed: PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, and the query 0xffffffff. */
const PERSONALITIES = [0, 8, 0x20000, 0x20008, 0xffffffff];

/** Each native architecture with the ones its kernel also runs (Docker's map): the filter covers all of them. */
const ARCH_MAP: SeccompProfile["archMap"] = (
  [
    ["X86_64", ["X86", "X32"]],
    ["AARCH64", ["ARM"]],
    ["MIPS64", ["MIPS", "MIPS64N32"]],
    ["MIPS64N32", ["MIPS", "MIPS64"]],
    ["MIPSEL64", ["MIPSEL", "MIPSEL64N32"]],
    ["MIPSEL64N32", ["MIPSEL", "MIPSEL64"]],
    ["S390X", ["S390"]],
    ["RISCV64", null],
    ["LOONGARCH64", null],
  ] as [string, string[] | null][]
).map(([a, subs]) => ({ architecture: `SCMP_ARCH_${a}`, subArchitectures: subs && subs.map((x) => `SCMP_ARCH_${x}`) }));

export interface SeccompArg {
  index: number;
  value: number;
  op: "SCMP_CMP_EQ" | "SCMP_CMP_LT" | "SCMP_CMP_GT" | "SCMP_CMP_MASKED_EQ";
}

export interface SeccompRule {
  names: string[];
  action: "SCMP_ACT_ALLOW" | "SCMP_ACT_ERRNO";
  errnoRet?: number;
  args?: SeccompArg[];
  comment?: string;
  includes?: { caps?: string[]; arches?: string[]; minKernel?: string };
  excludes?: { caps?: string[]; arches?: string[] };
}

/** Docker's seccomp profile format (what `docker run --security-opt seccomp=FILE` reads). */
export interface SeccompProfile {
  defaultAction: "SCMP_ACT_ERRNO";
  defaultErrnoRet: number;
  archMap: { architecture: string; subArchitectures: string[] | null }[];
  syscalls: SeccompRule[];
}

const EPERM = 1;
const ENOSYS = 38;

/** The profile of a box; `allowPtrace` (PATCHBAY_ALLOW_PTRACE=1) gives back PTRACE_CALLS alone. */
export function seccompProfile(o: { allowPtrace?: boolean } = {}): SeccompProfile {
  const allow = (names: string[], more: Omit<SeccompRule, "names" | "action"> = {}): SeccompRule => ({
    names,
    action: "SCMP_ACT_ALLOW",
    ...more,
  });
  const notDenied = (names: string[]) => names.filter((n) => !(n in DENIED));
  const s390 = ["s390", "s390x"];
  const syscalls: SeccompRule[] = [
    allow(notDenied(ALLOWED)),
    ...(o.allowPtrace
      ? [allow([...PTRACE_CALLS], { comment: "PATCHBAY_ALLOW_PTRACE=1", includes: { minKernel: "4.8" } })]
      : []),
    allow(["socket"], { args: [{ index: 0, value: AF_ALG, op: "SCMP_CMP_LT" }] }),
    allow(["socket"], { args: [{ index: 0, value: AF_ALG + 1, op: "SCMP_CMP_EQ" }] }),
    allow(["socket"], { args: [{ index: 0, value: AF_VSOCK, op: "SCMP_CMP_GT" }] }),
    ...PERSONALITIES.map((p) => allow(["personality"], { args: [{ index: 0, value: p, op: "SCMP_CMP_EQ" }] })),
    ...BY_ARCH.map(([arches, names]) => allow(names, { includes: { arches } })),
    ...BY_CAPABILITY.map(([cap, names]) => allow(notDenied(names), { includes: { caps: [cap] } })),
    // Without CAP_SYS_ADMIN: clone only without namespace flags (its flags are the second argument on s390);
    // clone3's flags are behind a pointer seccomp cannot read, so it says ENOSYS and libc falls back to clone.
    allow(["clone"], {
      args: [{ index: 0, value: CLONE_NS_FLAGS, op: "SCMP_CMP_MASKED_EQ" }],
      excludes: { caps: ["CAP_SYS_ADMIN"], arches: s390 },
    }),
    allow(["clone"], {
      args: [{ index: 1, value: CLONE_NS_FLAGS, op: "SCMP_CMP_MASKED_EQ" }],
      includes: { arches: s390 },
      excludes: { caps: ["CAP_SYS_ADMIN"] },
    }),
    { names: ["clone3"], action: "SCMP_ACT_ERRNO", errnoRet: ENOSYS, excludes: { caps: ["CAP_SYS_ADMIN"] } },
  ];
  return {
    defaultAction: "SCMP_ACT_ERRNO",
    defaultErrnoRet: EPERM,
    archMap: ARCH_MAP,
    syscalls: syscalls.filter((r) => r.names.length),
  };
}

/**
 * The SecurityOpt that gives a container the profile. Docker takes the profile's text (its CLI
 * reads the file and sends that); Podman's compatible API (4.x, 5.x) takes only a path, opened by
 * the engine on its host: the file is written on the worker's host, which must be the engine's
 * (the setup phase's socket mount already asks that of a rootless engine).
 */
export function seccompOption(engine: "docker" | "podman", o: { allowPtrace?: boolean } = {}): string {
  const text = JSON.stringify(seccompProfile(o));
  return `seccomp=${engine === "podman" ? profileFile(text) : text}`;
}

/**
 * The profile's text as a file any user can read (a rootless engine runs as another user), by its
 * hash, in a directory of this process's uid that only it can write: nobody else can put another
 * profile in its place. Written once, by rename, and read back where it was already there.
 */
export function profileFile(text: string, base = tmpdir()): string {
  const uid = process.getuid?.() ?? 0;
  const dir = join(base, `patchbay-seccomp-${uid}`);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) {
    throw new Error(
      `${dir} is not a directory of uid ${uid} that only it can write: remove it (the seccomp profile for Podman is written there)`,
    );
  }
  chmodSync(dir, 0o755); // whatever the umask: the engine's user must reach the file
  const file = join(dir, `${createHash("sha256").update(text).digest("hex").slice(0, 32)}.json`);
  const had = (() => {
    try {
      return lstatSync(file).isFile() && readFileSync(file, "utf8") === text;
    } catch {
      return false;
    }
  })();
  if (!had) {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, text);
    chmodSync(tmp, 0o644);
    renameSync(tmp, file);
  }
  return file;
}
