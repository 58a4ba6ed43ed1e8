# helper.py: patchbay's in-sandbox helper, one per sandbox, run as root (python3 -I -S -B -u, cwd /)
# on the sandbox's only attached exec. Loaded by src/sandbox/helper.ts through src/core/assets.ts, which
# speaks the framing below (HELPER_VERSION there must equal VERSION here). Every other process of
# patchbay's in the sandbox (the agent's shell, the supervisor, the file agent, verify's bash, the
# tar of a snapshot) is its child: started on request, as the uid:gid asked, its stdin, stdout and
# stderr carried as channels of this one stream. A `docker exec` costs the engine ~60 core-ms; a
# child of this process a fork and an exec. The children stay separate processes (the root
# supervisor, the file agent with the agent's file identity, the agent's bash): it only carries
# bytes, and never reads or runs anything of theirs.
#
# Start: prints `PBREADY:<pid>\n`, then only frames. A frame: [u8 type][u32 BE channel][u32 BE
# length] then `length` bytes.
#   worker -> helper   S spawn (JSON {argv, user "uid:gid", env ["K=V"], cwd, cut?: {head, tail},
#                      gate?: "read" | "write"});
#                      D stdin bytes; E close stdin; C drop the channel (its pipes closed: it reads
#                      EOF and gets SIGPIPE, as a closed exec stream); A u32: output bytes the worker
#                      consumed; L cut the output from now on: u32 head, u32 tail, u16 n, then the
#                      start marker (n bytes) and the end marker (the rest), see Cut below.
#   helper -> worker   O stdout bytes; e stderr bytes; a u32: stdin bytes written to the child (or
#                      dropped: it stopped reading); K u64: output bytes cut here (before the kept
#                      tail); Z output ended; X exit (JSON {code}: a signal as 128+n, as a shell
#                      says it). Z and X come once the child exited and its
#                      pipes are at EOF, or GRACE seconds after it exited while something it left
#                      (a background process) still holds them: as an exec's stream ends.
# Flow: at most WINDOW bytes of a channel's output are out unacknowledged (then its pipes are not
# read and the child blocks, as a paused exec stream), and the worker keeps at most WINDOW of its
# stdin unacknowledged: the helper never blocks on a child and its buffers are bounded.
# Cut: a command's output past its bound is cut here, in the box, instead of carried through the
# engine's stream and the worker only to be dropped there (a `yes | head -c 150M` cost the worker,
# dockerd and the shim more CPU than the command). Asked per spawn (its `cut`) or per command (an
# L frame, with the shell's markers): the output is dropped up to and after the start marker's
# first sight (what background processes wrote before the command began), then `head` bytes pass,
# then only the last `tail` bytes before the end marker (followed by 1-3 digits and a newline, as
# the worker reads it) are kept and the rest counted; at that marker (or at the output's end) a K
# frame says how many bytes were cut, the kept tail follows, and output passes as before. While
# it cuts, the channel's pipes are read whatever the window, in large reads, and stdout and
# stderr are one stream (said as stdout).
# A child is forked here and becomes its uid in its own process before its exec, which the helper
# never waits for: the agent can stop a child of its uid at any moment, and that stalls that
# channel only. A root spawn of `python3 -I -S -u [-B] -c SCRIPT ARGS...` with the helper's own
# locale variables (the supervisor, the file agent) runs SCRIPT in that forked child instead of
# exec'ing a new interpreter: the same session, stdio, signals, environment and argv as the exec
# would give, without the ~15-20 core-ms of an interpreter's start. A spawn that fails (no such
# program or directory, the pids limit) is a channel that prints why on stderr and exits 127 (not
# found) or 126. Environments: a root child gets trusted.py's TRUSTED_ENV and the spawn's own
# variables, nothing of the image's, and only a program that rule takes (else it exits 126 saying
# why); a child of another uid gets the box's environment (the image's ENV) and the spawn's.
# Landlock: every child of another uid than root gets a Landlock domain of its own just before its
# exec (see landlock_scope), so that no process of the agent's uid can pass the kernel's
# ptrace_may_access (ptrace, /proc/PID/mem, /proc/PID/environ) for one started by another spawn.
# Stdin at EOF (the worker went): every pipe closed, and it exits.
import os, sys, json, struct, selectors, signal, pwd, errno, time, collections, builtins, fcntl, mmap
VERSION = 2
WINDOW = 1 << 20
CHUNK = 64 << 10
GRACE = 2.0
HEAD = struct.Struct(">BII")
CUT_READ = 1 << 20  # a read while cutting, and the pipe's size then (F_SETPIPE_SZ)
CUT_MARK_MAX = 256
CUT_MAX = 64 << 20  # the largest head or tail a cut keeps (the worker asks for no more)
CUT_WAKE = 4 << 20  # bytes one wakeup reads of a cutting channel before the others' turn
# The environment as the exec gave it (python's own locale coercion, LC_CTYPE, is not passed on):
# the backend gives a root exec TRUSTED_ENV (trusted.py), with the box's own in BOX_ENV_VAR.
def initial_env():
    try:
        with open("/proc/self/environ", "rb") as f: raw = f.read()
        return dict(kv.split(b"=", 1) for kv in raw.split(b"\0") if b"=" in kv)
    except OSError: return dict(os.environb)
OWN_ENV = initial_env()
# The box's environment (the image's ENV), which the agent's processes get; a backend that does not
# hand it over leaves the helper's own.
def box_env():
    raw = OWN_ENV.get(BOX_ENV_VAR)
    if raw is None: return {k: v for k, v in OWN_ENV.items() if k != BOX_ENV_VAR}
    return dict(kv.split(b"=", 1) for kv in map(os.fsencode, json.loads(raw)) if b"=" in kv)
BOX_ENV = box_env()
BOX_ENV_JSON = os.fsencode(json.dumps([os.fsdecode(k + b"=" + v) for k, v in BOX_ENV.items()], separators=(",", ":")))
# What python's own start (PEP 538) set LC_CTYPE to, where it coerced a C locale: an exec'd python
# passes that on to what it runs, so an inline child does too.
COERCED = os.environb.get(b"LC_CTYPE") if os.environb.get(b"LC_CTYPE") != OWN_ENV.get(b"LC_CTYPE") else None
LOCALE_VARS = (b"LC_ALL", b"LC_CTYPE", b"LANG")
# Landlock (the kernel's LSM, 5.13 on). A process in a Landlock domain passes ptrace_may_access
# (ptrace, and the open of /proc/PID/mem or /proc/PID/environ) only for processes in its own domain
# or one nested in it. Every spawn of the agent's uid (the agent's shell, an MCP server, a custom
# tool's command, setup's and verify's commands, the file agent's commands as the agent) gets a
# domain of its own, inherited by all it starts: none of them can read or write another's memory
# or environment, though all are uid 1000. The ruleset handles one filesystem right nobody in a box
# has anyway (LANDLOCK_ACCESS_FS_MAKE_BLOCK: a block device's mknod needs CAP_MKNOD) and has no
# rules, so the domain changes nothing of what the process may do to files. Root children (the
# supervisor, the file agent, git, tar) get none: the supervisor kills by uid, from outside any
# domain. LANDLOCK_ABI is the kernel's Landlock ABI, probed once here; 0 where there is none
# (ENOSYS under gVisor, whose own rule lets a process reach its descendants only; EOPNOTSUPP where
# the kernel has it disabled; an architecture not listed): children then start without a domain.
LANDLOCK_NR = {"x86_64": (444, 446), "aarch64": (444, 446)}.get(os.uname().machine)  # create_ruleset, restrict_self
LANDLOCK_ACCESS_FS_MAKE_BLOCK = 1 << 11
def landlock_probe():
    if LANDLOCK_NR is None: return None, 0
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
    except Exception: return None, 0
    abi = libc.syscall(ctypes.c_long(LANDLOCK_NR[0]), None, ctypes.c_long(0), ctypes.c_long(1))  # LANDLOCK_CREATE_RULESET_VERSION
    return (libc, ctypes), max(int(abi), 0)
LANDLOCK_LIB, LANDLOCK_ABI = landlock_probe()
def landlock_scope():
    # In a forked child, as its uid: a domain of its own. A kernel that said it has Landlock and
    # then refuses is an error (the spawn fails), never a child that starts unscoped.
    if not LANDLOCK_ABI: return
    libc, ctypes = LANDLOCK_LIB
    # no_new_privs, which landlock_restrict_self needs of a process without CAP_SYS_ADMIN: every box
    # has it already (the engine's no-new-privileges); a helper run on the host (the local
    # backend) gives it here, so that its children are scoped as a box's are.
    if libc.prctl(ctypes.c_int(38), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS: " + os.strerror(ctypes.get_errno()))
    attr = ctypes.c_uint64(LANDLOCK_ACCESS_FS_MAKE_BLOCK)  # struct landlock_ruleset_attr, ABI 1's size
    fd = libc.syscall(ctypes.c_long(LANDLOCK_NR[0]), ctypes.byref(attr), ctypes.c_long(ctypes.sizeof(attr)), ctypes.c_long(0))
    if fd < 0: raise OSError(ctypes.get_errno(), "landlock_create_ruleset: " + os.strerror(ctypes.get_errno()))
    try:
        if libc.syscall(ctypes.c_long(LANDLOCK_NR[1]), ctypes.c_long(fd), ctypes.c_long(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self: " + os.strerror(ctypes.get_errno()))
    finally: os.close(fd)
# The gate: one pipe per box, held open here for the box's life (it never ends, and a write to it
# never fails for want of a reader), whose read end the agent's shell gets and whose write end the
# supervisor gets, each at GATE_FD, when its spawn asks (`gate`; the write end for root only). The
# worker sends a command's begin to the supervisor and the command to the shell at once; the
# supervisor writes the command's token here once its begin has noted when the command begins, and
# the shell reads up to that token before it reads the command: nothing of the command starts
# before its begin, in one round trip instead of two. The helper never reads or writes it; it
# clears the read end's flags for each shell it starts (see spawn).
GATE_FD = 9
GATE = os.pipe()
os.umask(0o022)
sel = selectors.DefaultSelector()
chans = {}
reaping = set()  # pids of dropped channels, still to be reaped

def out(kind, cid, body=b""):
    data = HEAD.pack(ord(kind), cid, len(body)) + body
    mv = memoryview(data)
    while mv: mv = mv[os.write(1, mv):]

class Chan:
    def __init__(self, cid):
        self.cid, self.code = cid, None
        # stdin waiting for the child: its frames as they came, and how much of the first is written
        self.inq, self.in_at, self.in_fd, self.in_eof, self.in_dead = collections.deque(), 0, None, False, False
        self.fds, self.watched, self.unacked = {}, set(), 0
        self.pid, self.err_fd, self.failed, self.grace, self.name, self.cut = 0, None, None, None, "", None
        self.cut_buf, self.big_pipes = None, set()  # kept from one cut to the next (see cut_read, set_cut)

class Cut:
    # One command's output, cut (see the header). Output is read straight into `buf`, made once per
    # cut (no buffer allocated per read: 150 MB in fresh 1 MiB reads cost more in page faults than
    # in copies), which holds it at `off` for `n` bytes from position `base`: what the end marker
    # may start in, and once past the head the kept tail. What is dropped only moves `off`; the
    # kept bytes move to the front only when a read would not fit after them. Positions count the
    # output after the start marker; `sent` is how much of the head has passed, `scan` where the
    # next search for the end begins.
    def __init__(self, head, tail, start=b"", end=b""):
        if not (0 <= head <= CUT_MAX and 0 <= tail <= CUT_MAX) or len(start) > CUT_MARK_MAX or len(end) > CUT_MARK_MAX: raise ValueError("a cut out of bounds")
        self.head, self.tail, self.start, self.end = head, tail, start, end
        self.phase = "start" if start else "body"
        self.keep = max(tail + len(end) + 4, len(start))  # the most `buf` holds between reads
        self.buf, self.off, self.n, self.base, self.sent, self.scan = None, 0, 0, 0, 0, 0

    @property
    def dropping(self):
        # Whether what comes now is read whatever the window (it is not passed on as it comes).
        return self.phase == "start" or self.base + self.n >= self.head

def cut_from_frame(body):
    head, tail, n = struct.unpack_from(">IIH", body)
    return Cut(head, tail, bytes(body[10:10 + n]), bytes(body[10 + n:]))

def send_out(ch, kind, b):
    for at in range(0, len(b), CHUNK):
        part = bytes(b[at:at + CHUNK])
        ch.unacked += len(part)
        out(kind, ch.cid, part)

def cut_read(ch, fd):
    # Reads of a cut channel's pipe into its buffer: large while it drops (and more while the pipe
    # has more, up to CUT_WAKE bytes: a writer that fills it as fast as it is read costs a wakeup per
    # read otherwise), else one within the window. Returns the bytes read (0 at EOF).
    total = 0
    while total < CUT_WAKE:
        c = ch.cut
        if c is None or (total and not c.dropping): break
        if c.buf is None:
            # The channel's last cut's buffer where it is large enough (a shell's cut per command).
            size = 2 * c.keep + CUT_READ
            # Private anonymous memory, not a bytearray (which fills it with zeros): a page costs the
            # box's memory only once output reaches it, so a shell whose commands print little holds
            # a few pages of it, not all of it (a MiB of every box). Private: mmap's default for
            # anonymous memory is shared (shmem), whose pages MADV_DONTNEED never gives back.
            c.buf = ch.cut_buf if ch.cut_buf is not None and len(ch.cut_buf) >= size else mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            ch.cut_buf = c.buf
        room = CUT_READ if c.dropping else max(1, min(CHUNK, WINDOW - ch.unacked))
        if c.off + c.n + room > len(c.buf):
            c.buf[0:c.n] = c.buf[c.off:c.off + c.n]; c.off = 0
        try:
            with memoryview(c.buf) as mv: k = os.readv(fd, [mv[c.off + c.n:c.off + c.n + room]])
        except BlockingIOError:
            if total: break
            raise
        if not k: return total
        c.n += k; total += k; cut_scan(ch)
    return total

def keep_from(c, at):
    # Drops what `buf` holds before position `at` (only `off` moves).
    if at > c.base:
        k = min(at - c.base, c.n)
        c.off += k; c.n -= k; c.base += k

def held(c, a, b):
    # The bytes of positions a..b, as `buf` holds them.
    return memoryview(c.buf)[c.off + a - c.base:c.off + b - c.base]

def end_at(c, i):
    # The end marker at buf[i]: its status follows (1-3 digits, a newline), "wait" while that may yet
    # come, None when it is not the marker.
    s = i + len(c.end)
    after = bytes(c.buf[s:min(s + 4, c.off + c.n)])
    k = 0
    while k < len(after) and k < 3 and 48 <= after[k] <= 57: k += 1
    if 0 < k < len(after) and after[k] == 10: return k + 1  # the status line's length
    return "wait" if k == len(after) and len(after) < 4 else None

def cut_scan(ch):
    # What was read: the start marker looked for, the head passed, the end marker looked for, the
    # tail kept.
    c = ch.cut
    if c.phase == "start":
        i = c.buf.find(c.start, c.off, c.off + c.n)
        if i < 0: return keep_from(c, c.base + c.n - len(c.start) + 1)  # what may begin the marker
        send_out(ch, "O", c.start)
        c.base = -(i - c.off + len(c.start))  # what follows the marker is position 0
        keep_from(c, 0)
        c.phase = "body"
    pos, m = c.base + c.n, None
    if c.end:
        i = c.buf.find(c.end, c.off + max(0, c.scan - c.base), c.off + c.n)
        while i >= 0:
            seen = end_at(c, i)
            if isinstance(seen, int): m, line = c.base + i - c.off, len(c.end) + seen; break
            if seen == "wait": c.scan = c.base + i - c.off; break
            i = c.buf.find(c.end, i + 1, c.off + c.n)
        else: c.scan = max(c.base, pos - len(c.end) + 1)
    if m is not None:
        cut_flush(ch, m)
        # The marker's line (what of it passed in the head, not again); what follows it is output
        # while no command runs, which the worker drops: it is dropped here.
        send_out(ch, "O", held(c, max(m, c.sent), max(m + line, c.sent)))
        ch.cut = None
        # A command that printed more than a read leaves its pages to the kernel until the next does.
        if c.base + c.n > CHUNK and hasattr(c.buf, "madvise"):
            try: c.buf.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError): pass  # kept, as a bytearray was
        return
    # The head passes as it comes; past it only the last `tail` bytes (and the marker's search) are kept.
    upto = min(pos, c.head)
    if upto > c.sent: send_out(ch, "O", held(c, c.sent, upto)); c.sent = upto
    lim = c.scan if c.end else pos  # an end marker found later begins here or after
    keep_from(c, min(lim, max(c.sent, lim - c.tail)))

def cut_flush(ch, upto):
    # The output before `upto` (the end marker, or the output's end): the rest of the head, then the
    # count of what was cut and the last `tail` bytes.
    c = ch.cut
    head_end = min(upto, c.head)
    if head_end > c.sent: send_out(ch, "O", held(c, c.sent, head_end)); c.sent = head_end
    if upto <= c.head: return
    kept = max(c.head, upto - c.tail, c.base)
    if kept > c.head: out("K", ch.cid, struct.pack(">Q", kept - c.head))
    send_out(ch, "O", held(c, kept, upto))

def set_cut(ch, cut):
    # A new cut replaces the last one; what that one kept is dropped (the worker has moved on).
    ch.cut = cut
    for fd in ch.fds:
        if fd in ch.big_pipes: continue
        ch.big_pipes.add(fd)
        try: fcntl.fcntl(fd, 1031, CUT_READ)  # F_SETPIPE_SZ: fewer, larger reads while it cuts
        except (OSError, ValueError): pass

def watch(ch):
    # Output pipes are read while the window has room (or the output is being cut); stdin's is
    # watched while bytes wait for it.
    for fd in list(ch.fds):
        want = ch.unacked < WINDOW or (ch.cut is not None and ch.cut.dropping)
        if want and fd not in ch.watched:
            sel.register(fd, selectors.EVENT_READ, (ch, fd)); ch.watched.add(fd)
        elif not want and fd in ch.watched:
            sel.unregister(fd); ch.watched.discard(fd)
    if ch.in_fd is not None:
        key = sel.get_map().get(ch.in_fd)
        if (ch.inq or ch.in_eof) and key is None: sel.register(ch.in_fd, selectors.EVENT_WRITE, (ch, -1))
        elif not (ch.inq or ch.in_eof) and key is not None: sel.unregister(ch.in_fd)

def close_in(ch):
    if ch.in_fd is not None:
        if sel.get_map().get(ch.in_fd) is not None: sel.unregister(ch.in_fd)
        os.close(ch.in_fd); ch.in_fd = None

def close_err(ch):
    if ch.err_fd is not None:
        sel.unregister(ch.err_fd); os.close(ch.err_fd); ch.err_fd = None

def close_out(ch):
    for fd in list(ch.fds):
        if fd in ch.watched: sel.unregister(fd)
        os.close(fd)
    ch.fds, ch.watched = {}, set()

def finish(ch):
    # The child exited and its output ended (or its grace passed): the channel's last frames.
    if ch.code is None or ch.cid not in chans: return
    if ch.fds and (ch.grace is None or time.monotonic() < ch.grace): return
    if ch.err_fd is not None: on_spawned(ch)  # why it could not start, before its end
    close_out(ch)
    if ch.cut is not None and ch.cut.phase == "body" and ch.cut.buf is not None: cut_flush(ch, ch.cut.base + ch.cut.n)
    ch.cut = None
    out("Z", ch.cid)
    out("X", ch.cid, json.dumps({"code": ch.failed if ch.failed is not None else ch.code}).encode())
    close_in(ch); del chans[ch.cid]

def status(st):
    return os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st) if os.WIFSIGNALED(st) else None

def reap():
    for ch in list(chans.values()):
        if ch.pid and ch.code is None:
            try: pid, st = os.waitpid(ch.pid, os.WNOHANG)
            except ChildProcessError: pid, st = ch.pid, 255 << 8
            if pid and status(st) is not None:
                ch.code = status(st)
                if ch.fds: ch.grace = time.monotonic() + GRACE
                finish(ch)
    for pid in list(reaping):
        try:
            if os.waitpid(pid, os.WNOHANG)[0]: reaping.discard(pid)
        except ChildProcessError: reaping.discard(pid)

def fail(ch, why, code):
    out("e", ch.cid, ("patchbay helper: %s\n" % why)[:4096].encode("utf-8", "replace"))
    ch.failed = code

def spawn(ch, req):
    try:
        uid, _, gid = str(req.get("user", "0:0")).partition(":")
        uid, gid = int(uid), int(gid or uid)
        argv = [os.fsencode(a) for a in req["argv"]]
        ch.name = argv[0][:200].decode("utf-8", "replace") if argv else ""
        cwd = os.fsencode(req.get("cwd", "/workspace"))
        asked = dict(kv.split(b"=", 1) for kv in map(os.fsencode, req.get("env", [])) if b"=" in kv)
        try: home = os.fsencode(pwd.getpwuid(uid).pw_dir)
        except KeyError: home = b"/"
        # A root process: the one rule of trusted.py (TRUSTED_ENV, its program checked, resolved
        # here so that a refusal is said before the fork), with the box's environment handed on for
        # the file agent's commands as the agent. The agent's uid: the box's environment.
        if uid == 0: env, prog = {**root_env(asked, home), BOX_ENV_VAR: BOX_ENV_JSON}, None
        else: env, prog = {**BOX_ENV, b"HOME": home, **asked}, None
        cut = req.get("cut")
        if cut is not None: ch.cut = Cut(int(cut["head"]), int(cut["tail"]))
        gate = {None: None, "read": GATE[0], "write": GATE[1]}[req.get("gate")]
        if gate == GATE[1] and uid != 0: raise ValueError("the gate's write end is root's")
        # Every copy of the read end is one open file: a flag the agent set on it (O_NONBLOCK, through
        # its shell's copy) is cleared for each new shell, so it never outlives the shell it set it in.
        if gate == GATE[0]: fcntl.fcntl(GATE[0], fcntl.F_SETFL, 0)
        if not argv or any(b"\0" in a for a in argv + [cwd]) or any(b"\0" in k + v or b"=" in k for k, v in env.items()): raise ValueError("a NUL or an empty program")
    except Exception as e:
        ch.code = 126; fail(ch, "a spawn it cannot read: %s" % str(e)[:200], 126); return finish(ch)
    if uid == 0:
        try: prog = trusted_program(argv[0])
        except OSError as e:
            ch.code = 127 if e.errno == errno.ENOENT else 126
            fail(ch, "cannot start %r as root: %s" % (ch.name, e.strerror or e), ch.code); return finish(ch)
    pipes = []
    try:
        pipes = [os.pipe() for _ in range(4)]
        pid = os.fork()
    except OSError as e:
        for r, w in pipes: os.close(r); os.close(w)
        ch.code = 126; fail(ch, "cannot start %r: %s" % (ch.name, e.strerror), 126); return finish(ch)
    if pid == 0: child(pipes, uid, gid, cwd, argv, env, prog, gate)
    for fd in (pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]): os.close(fd)
    ch.pid, ch.in_fd, ch.err_fd = pid, pipes[0][1], pipes[3][0]
    ch.fds = {pipes[1][0]: "O", pipes[2][0]: "e"}
    for fd in (ch.in_fd, *ch.fds): os.set_blocking(fd, False)
    sel.register(ch.err_fd, selectors.EVENT_READ, (ch, -2))
    if ch.cut is not None: set_cut(ch, ch.cut)
    watch(ch)

def child(pipes, uid, gid, cwd, argv, env, prog, gate=None):
    # In the forked child: its own session and stdio, nothing else open but the error pipe (closed
    # by the exec, or before an inline script) and its end of the gate if it asked for one, the
    # signals python ignores back to their defaults, then the uid; only then the directory (checked
    # as that uid) and the program. Whatever fails is written to the error pipe.
    step, err = "setup: ", pipes[3][1]
    try:
        try: sel.close()  # its epoll fd, before closerange: the object must not close a reused number
        except OSError: pass
        signal.set_wakeup_fd(-1)
        os.setsid()
        for i, fd in enumerate((pipes[0][0], pipes[1][1], pipes[2][1])): os.dup2(fd, i)
        keep = {err}
        if gate is not None:
            # Its end of the gate at GATE_FD, kept across the exec (the error pipe moved off it first).
            if err == GATE_FD: err = os.dup(err); keep = {err}
            if gate == GATE_FD: os.set_inheritable(GATE_FD, True)
            else: os.dup2(gate, GATE_FD)
            keep.add(GATE_FD)
        low = 3
        for fd in sorted(keep): os.closerange(low, fd); low = fd + 1
        os.closerange(low, 1 << 20)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD): signal.signal(sig, signal.SIG_DFL)
        step = "the uid: "
        os.setgroups([gid]); os.setresgid(gid, gid, gid); os.setresuid(uid, uid, uid)
        step = "its Landlock domain: "
        if uid != 0: landlock_scope()
        step = "the directory %r: " % cwd[:200].decode("utf-8", "replace")
        os.chdir(cwd)
        step = ""
        # Inline only as root (a fork holds a copy of the helper's memory: other channels' bytes in
        # flight; the agent's uid must not get one) and with the helper's own locale variables (its
        # interpreter's encodings were chosen from them).
        script = inline_script(argv) if uid == 0 and gid == 0 and all(env.get(k, b"") == OWN_ENV.get(k, b"") for k in LOCALE_VARS) else None
        # A root program by its checked real path (argv[0] as asked); the agent's through its PATH.
        if script is None: os.execve(prog, argv, env) if prog is not None else os.execvpe(argv[0], argv, env)
        # Started: the error pipe's EOF says so, as the exec's close-on-exec does.
        os.close(err); err = -1
        os._exit(run_inline(*script, env))
    except BaseException as e:
        if err >= 0:
            try: os.write(err, b"%d %s%s" % (getattr(e, "errno", 0) or 0, step.encode(), str(getattr(e, "strerror", None) or e).encode()[:300]))
            except BaseException: pass
    finally:
        os._exit(127)

# A python child run in the fork: only with this helper's own isolation and unbuffered stdio asked
# for, so that it behaves as the exec'd interpreter would (-B only saves bytecode writes).
INLINE_NEEDS, INLINE_MAY = {b"-I", b"-S", b"-u"}, {b"-I", b"-S", b"-u", b"-B"}
def inline_script(argv):
    if not argv or argv[0] != b"python3": return None
    i = 1
    while i < len(argv) and argv[i] in INLINE_MAY: i += 1
    if i + 1 >= len(argv) or argv[i] != b"-c" or not INLINE_NEEDS <= set(argv[1:i]): return None
    return argv[i + 1], argv[i + 2:]

def run_inline(script, args, env):
    # As python's own start leaves them: SIGPIPE and SIGXFSZ ignored (a write fails instead), the
    # environment (with its coerced LC_CTYPE) and argv the exec would have had, a __main__ of its
    # own. Its exit as python's: SystemExit's code, 1 after a traceback (130 for KeyboardInterrupt),
    # once its non-daemon threads and atexit handlers are done.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN); signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # Its name in ps (comm): the script's own from its first line (`# supervisor.py: ...`), as its
    # command line is this helper's.
    name = script[2:script.find(b":")] if script.startswith(b"# ") else b""
    if 0 < len(name) <= 15 and name.replace(b"_", b"").replace(b".", b"").isalnum():
        try:
            with open("/proc/self/comm", "wb") as f: f.write(name)
        except OSError: pass
    if COERCED is not None: env = {**env, b"LC_CTYPE": COERCED}
    os.environb.clear(); os.environb.update(env)
    sys.argv = ["-c"] + [os.fsdecode(a) for a in args]
    main = sys.modules["__main__"] = type(sys)("__main__")
    main.__builtins__ = builtins
    code = 0
    try:
        exec(compile(script, "<string>", "exec", dont_inherit=True), main.__dict__)
    except SystemExit as e:
        if e.code is None: code = 0
        elif isinstance(e.code, int): code = e.code
        else:
            code = 1
            try: print(e.code, file=sys.stderr)
            except BaseException: pass
    except BaseException as e:
        code = 130 if isinstance(e, KeyboardInterrupt) else 1
        tb = e.__traceback__.tb_next if e.__traceback__ else None  # from the script's own frame on
        try: sys.excepthook(type(e), e.with_traceback(tb), tb)
        except BaseException: pass
    # As the interpreter's own finalization: its non-daemon threads waited for, then atexit.
    try:
        if "threading" in sys.modules: sys.modules["threading"]._shutdown()
    except BaseException: pass
    try:
        import atexit; atexit._run_exitfuncs()
    except BaseException: pass
    for f in (sys.stdout, sys.stderr):
        try: f.flush()
        except BaseException: pass
    return code & 0xff

def on_spawned(ch):
    # The error pipe: EOF alone once the exec succeeded; else why it failed (the child exits 127).
    try: why = os.read(ch.err_fd, 4096)
    except OSError: why = b""
    close_err(ch)
    if why:
        n, _, msg = why.partition(b" ")
        code = 127 if int(n or 0) in (errno.ENOENT, errno.ENOTDIR) else 126
        fail(ch, "cannot start %r: %s" % (ch.name, msg.decode("utf-8", "replace")), code)

def drop(ch):
    # The worker is done with it: its pipes closed, nothing more said of it.
    close_out(ch); close_err(ch); close_in(ch)
    if ch.pid and ch.code is None: reaping.add(ch.pid)
    chans.pop(ch.cid, None)

def on_frame(kind, cid, body):
    if kind == "S":
        if cid in chans: return
        ch = chans[cid] = Chan(cid)
        try: req = json.loads(body)
        except ValueError: req = None
        return spawn(ch, req if isinstance(req, dict) else {})
    ch = chans.get(cid)
    if ch is None: return
    if kind == "D":
        if ch.in_dead or ch.in_fd is None: out("a", cid, struct.pack(">I", len(body)))
        elif body: ch.inq.append(body)
    elif kind == "E": ch.in_eof = True
    elif kind == "A": ch.unacked = max(0, ch.unacked - struct.unpack(">I", body[:4])[0])
    elif kind == "C": return drop(ch)
    elif kind == "L":
        try: set_cut(ch, cut_from_frame(body))
        except (ValueError, struct.error): pass
    watch(ch)

def on_output(ch, fd):
    cutting = ch.cut is not None and ch.cut.dropping
    if ch.unacked >= WINDOW and not cutting: return watch(ch)
    try:
        if ch.cut is not None:
            try: b = cut_read(ch, fd)
            except (BlockingIOError, OSError): raise
            except Exception:
                # A fault in the cut (never expected) ends the cut, not the helper and every process
                # of the box: the output passes as it comes, and the worker's own bound applies.
                ch.cut = None; b = 1
        else:
            b = os.read(fd, min(CHUNK, WINDOW - ch.unacked))
            if b: ch.unacked += len(b); out(ch.fds[fd], ch.cid, b)
    except BlockingIOError: return
    except OSError: b = b""
    if not b:
        if fd in ch.watched: sel.unregister(fd); ch.watched.discard(fd)
        del ch.fds[fd]; os.close(fd)
        if not ch.fds: return finish(ch)
    watch(ch)

def on_input(ch):
    # Written from the frames as they came (no buffer copied or shifted per write).
    n = 0
    try:
        while ch.inq:
            head = ch.inq[0]
            k = os.write(ch.in_fd, memoryview(head)[ch.in_at:])
            n += k; ch.in_at += k
            if ch.in_at == len(head): ch.inq.popleft(); ch.in_at = 0
    except BlockingIOError: pass
    except OSError:
        # It stopped reading (exited, or closed its stdin): what waits is dropped, and acknowledged.
        n += sum(map(len, ch.inq)) - ch.in_at; ch.inq.clear(); ch.in_at = 0; ch.in_dead = True; ch.in_eof = True
    if n: out("a", ch.cid, struct.pack(">I", n))
    if not ch.inq and ch.in_eof: close_in(ch)
    else: watch(ch)

def refuse_untrusted_self():
    # The helper is root: it runs only on an interpreter the rule of trusted.py takes (the backend
    # found it on TRUSTED_ENV's PATH; an image that put that python3 where the agent writes is refused).
    try: why = untrusted_why(os.path.realpath(os.readlink("/proc/self/exe")))
    except OSError as e: why = "its interpreter cannot be checked: %s" % e
    if why:
        sys.stderr.write("patchbay helper: refusing to run as root on %s: %s\n" % (sys.executable, why)); sys.stderr.flush()
        os._exit(126)

def main():
    refuse_untrusted_self()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False); os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    sel.register(wake_r, selectors.EVENT_READ, None)
    sel.register(0, selectors.EVENT_READ, "stdin")
    sys.stdout.write("PBREADY:%d\n" % os.getpid()); sys.stdout.flush()
    buf = bytearray()
    while True:
        graces = [ch.grace for ch in chans.values() if ch.grace is not None]
        for key, _ in sel.select(max(0, min(graces) - time.monotonic()) if graces else None):
            if key.data is None:
                try: os.read(wake_r, 4096)
                except BlockingIOError: pass
                reap()
            elif key.data == "stdin":
                b = os.read(0, 1 << 18)
                if not b:
                    for ch in list(chans.values()): drop(ch)
                    return
                buf += b
                at = 0  # the frames read off, then cut from the buffer once
                while len(buf) - at >= HEAD.size:
                    t, cid, n = HEAD.unpack_from(buf, at)
                    if len(buf) - at < HEAD.size + n: break
                    body = bytes(buf[at + HEAD.size:at + HEAD.size + n]); at += HEAD.size + n
                    on_frame(chr(t), cid, body)
                del buf[:at]
            else:
                ch, fd = key.data
                if ch.cid not in chans: continue
                if fd == -1:
                    if ch.in_fd is not None: on_input(ch)
                elif fd == -2:
                    if ch.err_fd is not None: on_spawned(ch)
                elif fd in ch.fds: on_output(ch, fd)
        for ch in [c for c in chans.values() if c.grace is not None and time.monotonic() >= c.grace]: finish(ch)

main()
