# file_agent.py: patchbay's file agent, run in every sandbox as root (python3 -I -S -u, cwd /) with
# the agent's file identity (setfsuid/setfsgid to the agent's uid), serving the worker on stdin.
# Loaded by src/sandbox/file-agent.ts through src/core/assets.ts; its protocol is typed on the TypeScript
# side in src/sandbox/agent-protocol.ts, which this file must match (PROTOCOL_VERSION there).
#
# argv[1]: a JSON object {"uid": the agent's uid, "gid": its gid, "errno": {errno number: code}}:
#          the one errno table, written once, in agent-protocol.ts.
# Framing: a request is one JSON line with "op" and "len", then `len` bytes of body (or, for a
#          run with "stream", frames of [u32 length][bytes] up to a zero length); a reply is one
#          JSON line with "len" (and "error"/"message" on failure), then `len` bytes of body.
import sys, os, json, stat, hashlib, ctypes, subprocess, threading, signal, select, selectors, time
VERSION = 2
ARGS = json.loads(sys.argv[1])
UID, GID = int(ARGS["uid"]), int(ARGS["gid"])
ERRNO = {int(k): v for k, v in ARGS["errno"].items()}
libc = ctypes.CDLL(None, use_errno=True)
os.setgroups([GID]); libc.setfsgid(GID); libc.setfsuid(UID)
# setfsuid reports the previous id: the agent's now, or the switch failed. gVisor has no setfsuid: there
# the agent becomes the agent's uid outright (the worker's timeouts and bounds still hold it to the protocol).
if libc.setfsuid(UID) != UID or libc.setfsgid(GID) != GID:
    os.setgid(GID); os.setuid(UID)
os.umask(0o022)
inp, out = sys.stdin.buffer, sys.stdout.buffer
def write_all(write, data):
    # A raw write (os.write, or stdout under -u) may take part of the data: write until all is out.
    mv = memoryview(data)
    while mv: mv = mv[write(mv):]
def reply(h, body=b""):
    # One write for the header and the body: the helper forwards them in as few frames as it can.
    h["len"] = len(body)
    write_all(out.write, b"%s\n%s" % (json.dumps(h).encode(), body))
def kind(m):
    return "directory" if stat.S_ISDIR(m) else "file" if stat.S_ISREG(m) else "other"
def read_fd(fd, limit):
    chunks, n = [], 0
    while True:
        b = os.read(fd, 1 << 20)
        if not b: return b"".join(chunks)
        chunks.append(b); n += len(b)
        if n > limit: raise OSError(27, "File too large")
def read_head(fd, limit):
    # At most `limit` bytes from the start, however large the file is or grows.
    chunks, n = [], 0
    while n < limit:
        b = os.read(fd, min(1 << 20, limit - n))
        if not b: break
        chunks.append(b); n += len(b)
    return b"".join(chunks)
def stat_reply(st, p, real):
    return {"type": kind(st.st_mode), "size": st.st_size, "mode": st.st_mode & 0o7777, "mtime": st.st_mtime_ns, "real": real, "link": os.path.islink(p) or real != os.path.abspath(p)}
def op_stat(r, body):
    p = r["path"]
    try: st = os.stat(p)
    except FileNotFoundError: return {"missing": True}, b""
    real = os.path.realpath(p)
    cap = r.get("read")
    if cap is None or not stat.S_ISREG(st.st_mode) or st.st_size > cap: return stat_reply(st, p, real), b""
    # "read": the file's bytes with its stat, opened as op_read opens it (O_NONBLOCK: a FIFO swapped
    # in meanwhile must not hang us; no more than `cap` bytes however it grows). What cannot be read
    # here is left to the worker's own read, which then says why. "have": the sha256 of the content
    # the worker holds; when the bytes read have it, they are not sent again.
    try: fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError: return stat_reply(st, p, real), b""
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or fst.st_size > cap: return stat_reply(st, p, real), b""
        data = read_head(fd, cap + 1)
    except OSError: return stat_reply(st, p, real), b""
    finally: os.close(fd)
    if len(data) > cap: return stat_reply(st, p, real), b""
    h = stat_reply(fst, p, real); h["read"] = True; h["size"] = len(data)
    if r.get("have") is not None and hashlib.sha256(data).hexdigest() == r["have"]:
        h["same"] = True; return h, b""
    return h, data
def open_nofollow(p):
    # Each component opened below the one before with O_NOFOLLOW: what is opened is the path's own
    # file, with no symlink on the way, even if one is swapped in meanwhile (a check of the name
    # after the open would pass once it was swapped back).
    parts = [x for x in p.split("/") if x]
    if not parts or any(x in (".", "..") for x in parts): raise OSError(22, "not a plain absolute path")
    d = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for x in parts[:-1]:
            nd = os.open(x, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=d)
            os.close(d); d = nd
        return os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=d)
    except OSError as e:
        if e.errno == 40: raise OSError(22, "a symbolic link on the path: not followed")
        raise
    finally: os.close(d)
def op_read(r, body):
    # O_NONBLOCK: opening a FIFO the agent made must not hang us.
    fd = open_nofollow(r["path"]) if r.get("nofollow") else os.open(r["path"], os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode): raise IsADirectoryError(21, "Is a directory")
        if not stat.S_ISREG(st.st_mode): raise OSError(22, "not a regular file")
        if r.get("head"): data = read_head(fd, r["max"])
        elif st.st_size > r["max"]: return {"error": "EFBIG", "size": st.st_size}, b""
        else: data = read_fd(fd, r["max"])
        return {"mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid, "real": os.path.realpath(r["path"])}, data
    finally: os.close(fd)
def op_write(r, body):
    p, splice = r["path"], r.get("splice")
    if splice is not None and r.get("expect") is None: raise OSError(22, "a splice needs the content it applies to (expect)")
    if splice is not None and not (isinstance(splice, list) and len(splice) == 2 and all(type(x) is int for x in splice)): raise OSError(22, "a splice is two integers")
    exists = os.path.exists(p)
    if exists and os.path.isdir(p): raise IsADirectoryError(21, "Is a directory")
    # A splice applies to the content checked: with none (the file gone), it has changed.
    if splice is not None and not exists: return {"error": "ECHANGED"}, b""
    # Opened without O_CREAT when it exists, so its mode and owner stay; truncated only after the
    # check. A dangling symlink is written through (O_EXCL would refuse it).
    if exists: fd = os.open(p, os.O_RDWR | os.O_NONBLOCK)
    else: fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | os.O_CREAT | (0 if os.path.islink(p) else os.O_EXCL), r.get("mode", 0o644))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode): raise OSError(22, "not a regular file")
        if exists and r.get("expect") is not None:
            old = read_fd(fd, 1 << 31)
            if hashlib.sha256(old).hexdigest() != r["expect"]: return {"error": "ECHANGED"}, b""
            if splice is not None:
                at, cut = int(splice[0]), int(splice[1])
                if at < 0 or cut < 0 or at + cut > len(old): raise OSError(22, "a splice outside the file")
                body = old[:at] + body + old[at + cut:]
        # Reserve the space first: on a full disk the write fails before the old content is gone.
        try: os.posix_fallocate(fd, 0, max(len(body), 1))
        except OSError as e:
            if e.errno == 28: raise
        os.lseek(fd, 0, 0); os.ftruncate(fd, 0)
        write_all(lambda m: os.write(fd, m), body)
        if r.get("mode") is not None: os.fchmod(fd, r["mode"])
    finally: os.close(fd)
    return {}, b""
def op_mkdirp(r, body):
    os.makedirs(r["path"], 0o755, exist_ok=True); return {}, b""
def op_remove(r, body):
    os.remove(r["path"]); return {}, b""
def op_list(r, body):
    root, res = r["path"], []
    for name in sorted(os.listdir(root)):
        if name.startswith("."): continue
        p = os.path.join(root, name); res.append(p)
        if os.path.isdir(p) and not os.path.islink(p):
            try: res += [os.path.join(p, n) for n in sorted(os.listdir(p)) if not n.startswith(".")]
            except OSError: pass
    return {"entries": res}, b""
# "digest": a fingerprint of a tree's metadata, no content read: every entry's path, inode, mode,
# size, mtime and ctime to the nanosecond (a top-level .git left out: git never takes it). The
# agent can set an mtime but not a ctime, so any write of its shows. Bounded by "max" entries.
def op_digest(r, body):
    root, left, h, stack = r["path"], int(r.get("max", 20000)), hashlib.sha1(), [r["path"]]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if d == root and e.name == ".git": continue
                left -= 1
                if left < 0: return {"over": True}, b""
                st = e.stat(follow_symlinks=False)
                h.update(b"%s\0%d %d %d %d %d\n" % (os.fsencode(e.path), st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
                if stat.S_ISDIR(st.st_mode): stack.append(e.path)
    return {"digest": h.hexdigest()}, b""
# "run": a command for the worker (git for the baseline and the patch, tar for a load), as the uid
# it names, without a docker exec each time (on these machines an exec costs ~120 ms and a runc
# start). Only as root: with no setfsuid (gVisor) the worker uses docker exec. Its stdin is the
# body, or with "stream" frames of [u32 length][bytes] up to a zero length; stdout is kept up to
# "max" bytes and stderr's head and tail, the rest drained.
# A command as root goes by the rule of trusted.py (TRUSTED_ENV and the worker's variables, a
# checked program); one as another uid gets the box's environment (the image's ENV, which the helper
# hands over in BOX_ENV_VAR) and takes its uid in the forked child, before its exec: nothing of the
# image's environment ever reaches a process while it is root.
IS_ROOT = os.getuid() == 0
def box_env():
    raw = os.environb.get(BOX_ENV_VAR)
    if raw is None: return {k: v for k, v in os.environb.items() if k != b"PYTHONDONTWRITEBYTECODE"}
    return dict(kv.split(b"=", 1) for kv in map(os.fsencode, json.loads(raw)) if b"=" in kv)
BOX_ENV = box_env()
def frames():
    while True:
        n = int.from_bytes(inp.read(4), "big")
        if n == 0: return
        yield inp.read(n)
class Sink:
    # An output kept up to "keep" bytes (and its last "tail" bytes), all of it counted.
    def __init__(self, keep, tail): self.keep, self.tail, self.parts, self.n, self.last = keep, tail, [], 0, b""
    def add(self, b):
        if self.n < self.keep: self.parts.append(b[:self.keep - self.n])
        self.n += len(b)
        if self.tail: self.last = (self.last + b)[-self.tail:]
def drain(fd, sink):
    while True:
        b = os.read(fd, 1 << 16)
        if not b: return
        sink.add(b)
# Files the command needs, written first from the head of the body (as root: 0600, parents 0700),
# only under /patchbay: the worker's pack for the private store, with no process to split it off.
def put_files(put, body):
    off = 0
    libc.setfsuid(0); libc.setfsgid(0)
    try:
        for path, n in put:
            if not path.startswith("/patchbay/") or "/../" in path + "/" or "/./" in path + "/": raise OSError(22, "put outside /patchbay")
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try: write_all(lambda b: os.write(fd, b), memoryview(body)[off:off + int(n)])
            finally: os.close(fd)
            off += int(n)
    finally: libc.setfsuid(UID); libc.setfsgid(GID)
    return body[off:]
def op_run(r, body):
    gen = frames() if r.get("stream") else None
    try:
        if not IS_ROOT: raise PermissionError(1, "the file agent is not root here")
        if r.get("put"): body = put_files(r["put"], body)
        asked = {os.fsencode(k): os.fsencode(v) for k, _, v in (kv.partition("=") for kv in r.get("env", []))}
        uid, gid = int(r.get("uid", 0)), int(r.get("gid", 0))
        argv, ids = [os.fsencode(a) for a in r["argv"]], {}
        if uid == 0: env, prog = root_env(asked), trusted_program(argv[0])
        else: env, prog, ids = {**BOX_ENV, **asked}, None, {"user": uid, "group": gid, "extra_groups": [gid]}
        libc.setfsuid(0); libc.setfsgid(0)  # for the child's chdir; back right after the fork
        try: p = subprocess.Popen(argv, executable=prog, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=r.get("cwd") or "/", env=env, start_new_session=True, **ids)
        finally: libc.setfsuid(UID); libc.setfsgid(GID)
    except BaseException:
        for _ in gen or (): pass  # the frames still come: read them, or the next request would be read from them
        raise
    try: return supervise(p, r, gen) if gen else supervise_body(p, r, body)
    except BaseException:
        killpg(p)
        for _ in gen or (): pass
        raise
def killpg(p):
    try: os.killpg(p.pid, signal.SIGKILL)
    except OSError: pass
def ran(p, code, killed, out, err):
    stdout = b"".join(out.parts)
    e_head = b"".join(err.parts)
    stderr = e_head if err.n <= len(e_head) else e_head + b"\n[...]\n" + err.last[-max(0, min(len(err.last), err.n - len(e_head))):]
    code = 137 if killed and code < 0 else (128 - code if code < 0 else code)
    return {"exit": code, "out": len(stdout), "err": len(stderr), "truncated": out.n > len(stdout), "timedOut": bool(killed)}, stdout + stderr
# Pipes of a command abandoned with a process still holding them: kept open for good, so that
# their fd numbers are never reused by a later command while a reader may still read them.
LINGER = []
def lingered(p):
    LINGER.append(p)
    return {"error": "EIO", "message": "a process left by the command kept its output open"}, b""
# With the whole stdin in hand (every run but a stream): one thread, a selector over the three
# pipes, no threads to start. The same bounds as supervise: the timeout kills the process group;
# once the command has ended, stdin not taken within 2 s is dropped, and output still held open
# 2 s later is killed, then abandoned 2 s after that.
def supervise_body(p, r, body):
    deadline = time.monotonic() + float(r.get("timeout", 300))
    out, err = Sink(int(r.get("max", 1 << 26)), 0), Sink(8192, 8192)
    sel, sinks = selectors.DefaultSelector(), {p.stdout.fileno(): out, p.stderr.fileno(): err}
    for fd in sinks: os.set_blocking(fd, False); sel.register(fd, selectors.EVENT_READ)
    infd, mv = p.stdin.fileno(), memoryview(body)
    def stop_input():
        if infd in sel.get_map(): sel.unregister(infd)
        try: p.stdin.close()
        except OSError: pass
    if mv: os.set_blocking(infd, False); sel.register(infd, selectors.EVENT_WRITE)
    else: stop_input()
    killed = ended = swept = None
    while sel.get_map():
        now = time.monotonic()
        if not killed and now >= deadline: killpg(p); killed = now
        if ended is None and (killed or p.poll() is not None): ended = now
        if ended is not None and now - ended > 2:
            stop_input()
            if not swept: killpg(p); swept = now
            elif now - swept > 2:
                for fd in list(sel.get_map()): sel.unregister(fd)
                return lingered(p)
        # Waking now and then only to see whether the command ended with its output still held open.
        for key, _ in sel.select(0.1 if ended is not None else max(0.0, min(deadline - now, 0.25))):
            fd = key.fd
            if fd == infd:
                try: mv = mv[os.write(fd, mv):]
                except BlockingIOError: continue
                except OSError: mv = mv[:0]  # no reader left (exited, or tar failed)
                if not mv: stop_input()
                continue
            try: b = os.read(fd, 1 << 16)
            except BlockingIOError: continue
            if b: sinks[fd].add(b)
            else: sel.unregister(fd)
    # Its output closed; the command itself may still run (it closed them): the timeout holds.
    try: code = p.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired: killpg(p); killed = True; code = p.wait()
    return ran(p, code, killed, out, err)
def supervise(p, r, gen):
    killed = []
    def kill():
        killed.append(1); killpg(p)
    timer = threading.Timer(float(r.get("timeout", 300)), kill); timer.start()
    out, err = Sink(int(r.get("max", 1 << 26)), 0), Sink(8192, 8192)
    readers = [threading.Thread(target=drain, args=(p.stdout.fileno(), out), daemon=True),
               threading.Thread(target=drain, args=(p.stderr.fileno(), err), daemon=True)]
    for t in readers: t.start()
    # stdin without blocking for good: once the command has exited (or was killed), a process that
    # holds its stdin without reading gets 2 s, then the rest is dropped; the frames are still read.
    fd = p.stdin.fileno(); os.set_blocking(fd, False); feeding = [True]
    def feed(data):
        mv = memoryview(data); since = None
        while mv and feeding[0]:
            try:
                mv = mv[os.write(fd, mv):]; continue
            except BlockingIOError: pass
            except OSError: feeding[0] = False; return  # no reader left (exited, or tar failed)
            select.select([], [fd], [], 0.5)
            if p.poll() is not None or killed:
                since = since or time.monotonic()
                if time.monotonic() - since > 2: feeding[0] = False
    for chunk in gen: feed(chunk)
    try: p.stdin.close()
    except OSError: pass
    code = p.wait(); timer.cancel()
    # A process it left behind holding the pipes open must not hold the reply up.
    for t in readers: t.join(2)
    if any(t.is_alive() for t in readers): kill()
    for t in readers: t.join(2)
    if any(t.is_alive() for t in readers): return lingered(p)
    return ran(p, code, killed, out, err)
def op_hello(r, body):
    # "has": what this agent does that version 2's first form did not (agent-protocol.ts FEATURES).
    return {"pid": os.getpid(), "root": IS_ROOT, "version": VERSION, "has": ["splice"]}, b""
OPS = {"hello": op_hello, "stat": op_stat, "read": op_read, "write": op_write, "mkdirp": op_mkdirp, "remove": op_remove, "list": op_list, "digest": op_digest, "run": op_run}
while True:
    line = inp.readline()
    if not line: break
    r = json.loads(line); n = r.get("len", 0); body = inp.read(n) if n else b""
    try: h, data = OPS[r["op"]](r, body)
    except OSError as e: h, data = {"error": ERRNO.get(e.errno, "EIO"), "message": e.strerror or str(e)}, b""
    except Exception as e: h, data = {"error": "EINVAL", "message": str(e)}, b""  # e.g. a NUL in a path
    reply(h, data)
