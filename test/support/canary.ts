// A search of a sandbox for a secret (a canary) that must not be in it: the credential tests plant
// a token on the worker's side only, then look for it everywhere the sandbox's code could read.
// findCanary runs the container's own python3 -I in its mount and PID namespaces as this host's
// root (nsenter on the engine's pid of the container): not `docker exec -u 0`, because the box's
// bounding set lacks CAP_SYS_PTRACE (even `--privileged` cannot add it), without which root may
// not read the environment or memory of another uid's process. Engine and test share this host.
// It searches
//   - every regular file of its file system, /tmp, /workspace, the home directories and
//     /patchbay-egress among them (not /proc, /sys or /dev, but /dev/shm),
//   - /proc/PID/environ and /proc/PID/cmdline of every process,
//   - the memory of every process: each readable region of /proc/PID/maps read through
//     /proc/PID/mem, at most `memoryLimit` bytes a process,
// for the canary's bytes and for its base64 (at each of the three alignments it can take inside a
// longer base64 text, and as `user:canary` whole when a user is given: a Basic header). The canary
// reaches the search on its stdin, never its argv, and the search leaves its own process out. A
// process whose memory or a file it cannot read is an error, never a clean result.
import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";

/** Where a canary was found. */
export interface Finding {
  where: "file" | "environ" | "cmdline" | "memory";
  /** The file's path (for "file"). */
  path?: string;
  /** The process (for "environ", "cmdline" and "memory"). */
  pid?: number;
  /** The process's name, /proc/PID/comm. */
  comm?: string;
  /** What matched: the canary's bytes, its base64, or the base64 of `user:canary`. */
  form: "raw" | "base64" | "basic";
}

/** How findCanary searches. */
export interface CanaryOptions {
  /** Look for the base64 of `user:canary` too (a Basic credential). */
  user?: string;
  /** The most bytes of memory read from one process. @default 1 GiB */
  memoryLimit?: number;
}

/** What a search covered, beside what it found. */
export interface CanaryReport {
  findings: Finding[];
  /** Regular files and their bytes read. */
  files: number;
  fileBytes: number;
  /** Processes looked at (the search's own left out) and bytes of their memory read. */
  processes: number;
  memoryBytes: number;
}

const SEARCH = String.raw`
import base64, json, os, stat, sys
needles = [(base64.b64decode(n["b"]), n["form"]) for n in json.load(sys.stdin)["needles"]]
limit = int(sys.argv[1])
longest = max(len(n) for n, _ in needles)
me = os.getpid()
found, errors, seen = [], [], set()
report = {"files": 0, "fileBytes": 0, "processes": 0, "memoryBytes": 0}
def hit(buf, where, **at):
    for n, form in needles:
        key = (where, at.get("path"), at.get("pid"), form)
        if key not in seen and n in buf:
            seen.add(key)
            if len(found) < 1000: found.append(dict(where=where, form=form, **at))
def scan(read, where, **at):
    tail = b""
    while True:
        chunk = read()
        if not chunk: return
        buf = tail + chunk
        hit(buf, where, **at)
        tail = buf[-(longest - 1):] if longest > 1 else b""
def files(top):
    for root, dirs, names in os.walk(top, onerror=lambda e: errors.append("walk %s: %s" % (e.filename, e.strerror))):
        if root == "/": dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
        for name in names:
            p = os.path.join(root, name)
            try:
                if not stat.S_ISREG(os.lstat(p).st_mode): continue
                with open(p, "rb", buffering=0) as f:
                    report["files"] += 1
                    def read():
                        b = f.read(1 << 20); report["fileBytes"] += len(b); return b
                    scan(read, "file", path=p)
            except FileNotFoundError: pass
            except OSError as e: errors.append("file %s: %s" % (p, e.strerror))
files("/")
if os.path.isdir("/dev/shm"): files("/dev/shm")
def memory(pid, comm):
    try:
        maps = open("/proc/%d/maps" % pid).read().splitlines()
        mem = open("/proc/%d/mem" % pid, "rb", buffering=0)
    except (FileNotFoundError, ProcessLookupError): return
    left = limit
    with mem:
        for line in maps:
            f = line.split()
            if f[1][0] != "r" or (len(f) > 5 and f[5] in ("[vvar]", "[vvar_vclock]", "[vsyscall]")): continue
            start, end = (int(x, 16) for x in f[0].split("-"))
            pos = [start]
            def read():
                nonlocal left
                n = min(1 << 20, end - pos[0], left)
                if n <= 0: return b""
                try:
                    mem.seek(pos[0]); b = mem.read(n)
                except OSError: return b""
                pos[0] += n; left -= len(b); report["memoryBytes"] += len(b); return b
            scan(read, "memory", pid=pid, comm=comm)
            if left <= 0: return
for d in os.listdir("/proc"):
    if not d.isdigit() or int(d) == me: continue
    pid = int(d)
    try:
        comm = open("/proc/%d/comm" % pid).read().strip()
        for part in ("environ", "cmdline"):
            with open("/proc/%d/%s" % (pid, part), "rb") as f: hit(f.read(), part, pid=pid, comm=comm)
        report["processes"] += 1
        memory(pid, comm)
    except (FileNotFoundError, ProcessLookupError): pass
    except OSError as e: errors.append("process %d: %s" % (pid, e.strerror))
print(json.dumps(dict(report, findings=found, errors=errors[:20])))
`;

/**
 * The canary's forms to look for: its bytes; the part of its base64 that is the same wherever it
 * starts inside a longer text (three alignments: a 3-byte group mixing it with its neighbours
 * encodes differently, so those groups are cut off); and, with a user, `user:canary` whole.
 */
export function canaryNeedles(canary: string, user?: string): { form: Finding["form"]; bytes: Buffer }[] {
  const raw = Buffer.from(canary);
  if (raw.length < 16)
    throw new Error(`a canary needs 16 bytes at least (got ${raw.length}): a shorter one matches by chance`);
  const cores = [0, 1, 2].map((shift) => {
    const b64 = Buffer.concat([Buffer.alloc(shift), raw])
      .toString("base64")
      .replace(/=+$/, "");
    const end = (shift + raw.length) % 3 ? b64.length - 4 : b64.length;
    return Buffer.from(b64.slice(shift ? 4 : 0, end));
  });
  return [
    { form: "raw", bytes: raw },
    ...cores.map((bytes) => ({ form: "base64" as const, bytes })),
    ...(user
      ? [{ form: "basic" as const, bytes: Buffer.from(Buffer.from(`${user}:${canary}`).toString("base64")) }]
      : []),
  ];
}

/**
 * Searches the container (a name or an id) for the canary: its files, every process's
 * environment, argv and memory. Resolves to what was found and what was covered; rejects when the
 * search could not read something (a file, a process's memory), naming it, never the canary.
 */
export async function searchCanary(container: string, canary: string, opts: CanaryOptions = {}): Promise<CanaryReport> {
  const needles = canaryNeedles(canary, opts.user).map((n) => ({ form: n.form, b: n.bytes.toString("base64") }));
  const limit = String(opts.memoryLimit ?? 1 << 30);
  const inspect = await promisify(execFile)("docker", ["inspect", "-f", "{{.State.Pid}}", container]);
  const pid = inspect.stdout.trim();
  if (!/^[1-9]\d*$/.test(pid)) throw new Error(`canary search: container ${container} is not running (pid ${pid})`);
  const argv = ["-t", pid, "-m", "-p", "--", "python3", "-I", "-c", SEARCH, limit];
  // The image's PATH finds python3 in its own file system (nsenter looks it up after entering).
  const child = spawn("nsenter", argv, {
    stdio: ["pipe", "pipe", "pipe"],
    env: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
  });
  let [out, err] = ["", ""];
  child.stdout.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-1_000_000)));
  child.stderr.on("data", (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  child.stdin.end(JSON.stringify({ needles }));
  const code = await new Promise<number | null>((done, fail) => child.once("error", fail).once("close", done));
  if (code !== 0) throw new Error(`canary search in ${container} failed (exit ${code}): ${err}`);
  const r = JSON.parse(out) as CanaryReport & { errors: string[] };
  if (r.errors.length)
    throw new Error(`canary search in ${container} could not read everything:\n${r.errors.join("\n")}`);
  return {
    findings: r.findings,
    files: r.files,
    fileBytes: r.fileBytes,
    processes: r.processes,
    memoryBytes: r.memoryBytes,
  };
}

/** Where the canary is in the container (searchCanary's findings alone); empty when it is nowhere. */
export async function findCanary(container: string, canary: string, opts: CanaryOptions = {}): Promise<Finding[]> {
  return (await searchCanary(container, canary, opts)).findings;
}
