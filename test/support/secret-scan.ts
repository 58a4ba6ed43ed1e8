// Two searches for a secret that must be nowhere: SECRET_SCAN, a python script a job's own verify
// runs in its sandbox (so it sees what the sandbox's uid sees), and redisText, every key of a
// Redis read whole. The script is never given the secret: for each form of it (the secret, its
// base64) it gets a marker (the form's first MARKER_CHARS characters), the form's length and the
// sha256 of its bytes; wherever the marker occurs it hashes that many bytes from there. The marker
// must be a part of the secret that says nothing of the rest (a fixed prefix, or an IV that is
// public by design).
import { createHash } from "node:crypto";
import { Redis } from "ioredis";

/** How many characters of each form the script is given to find it by. */
export const MARKER_CHARS = 12;

/**
 * Walks the file system under its `--root` (default `/`; at `/` not /proc, /sys or /dev, but
 * /dev/shm) and reads /proc/PID/environ and cmdline of every process it can. Prints one line per
 * finding and a summary; exits 1 when it found a form of the secret, 0 otherwise. What it cannot
 * read (another uid's file) it counts, as the sandbox's code could not read it either.
 */
export const SECRET_SCAN = String.raw`
import hashlib, os, stat, sys
args = sys.argv[1:]
root = "/"
if args[:1] == ["--root"]:
    root, args = args[1], args[2:]
needles = []
for a in args:
    marker, n, digest = a.rsplit(":", 2)
    needles.append((marker.encode(), int(n), digest))
longest = max(n for _, n, _ in needles)
found, unreadable, files, total = [], 0, 0, 0
def look(buf, where):
    for marker, n, digest in needles:
        i = buf.find(marker)
        while i >= 0:
            if hashlib.sha256(buf[i:i + n]).hexdigest() == digest:
                found.append(where); return
            i = buf.find(marker, i + 1)
def scan(path):
    global files, total
    with open(path, "rb", buffering=0) as f:
        files += 1
        tail = b""
        while True:
            chunk = f.read(1 << 20)
            if not chunk: return
            total += len(chunk)
            buf = tail + chunk
            look(buf, "file " + path)
            tail = buf[-(longest - 1):]
def walk(top):
    global unreadable
    for d, dirs, names in os.walk(top):
        if d == "/": dirs[:] = [x for x in dirs if x not in ("proc", "sys", "dev")]
        for name in names:
            p = os.path.join(d, name)
            try:
                if stat.S_ISREG(os.lstat(p).st_mode): scan(p)
            except FileNotFoundError: pass
            except OSError: unreadable += 1
walk(root)
if root == "/" and os.path.isdir("/dev/shm"): walk("/dev/shm")
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid(): continue
    for part in ("environ", "cmdline"):
        try:
            with open("/proc/%s/%s" % (pid, part), "rb") as f: look(f.read(), "%s of process %s" % (part, pid))
        except OSError: unreadable += 1
for f in found: print("FOUND", f)
print("secret scan: %d files, %d bytes read, %d unreadable, %d found" % (files, total, unreadable, len(found)))
sys.exit(1 if found else 0)
`;

/** The script's arguments for a secret: `marker:length:sha256` for the secret and for its base64. */
export function secretScanArgs(secret: string): string[] {
  return [secret, Buffer.from(secret).toString("base64")].map((form) => {
    const bytes = Buffer.from(form);
    return `${form.slice(0, MARKER_CHARS)}:${bytes.length}:${createHash("sha256").update(bytes).digest("hex")}`;
  });
}

/** Every key of the Redis at `url`, each read whole by its type (strings, hashes, lists, sets, zsets, streams), one line each. */
export async function redisText(url: string): Promise<string> {
  const r = new Redis(url);
  const out: string[] = [];
  try {
    let cursor = "0";
    do {
      const [next, keys] = await r.scan(cursor, "COUNT", 1000);
      cursor = next;
      for (const key of keys) out.push(`${key} ${JSON.stringify(await readKey(r, key))}`);
    } while (cursor !== "0");
  } finally {
    r.disconnect();
  }
  return out.join("\n");
}

async function readKey(r: Redis, key: string): Promise<unknown> {
  const type = await r.type(key);
  if (type === "string") return r.get(key);
  if (type === "hash") return r.hgetall(key);
  if (type === "list") return r.lrange(key, 0, -1);
  if (type === "set") return r.smembers(key);
  if (type === "zset") return r.zrange(key, "0", "-1", "WITHSCORES");
  if (type === "stream") return r.xrange(key, "-", "+");
  throw new Error(`redisText: key ${key} is of type ${type}, which it cannot read`);
}
