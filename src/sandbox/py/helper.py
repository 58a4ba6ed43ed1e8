# helper.py: patchbay's in-sandbox helper, one per sandbox, run as root (python3 -I -S -B -u, cwd /)
# on the sandbox's only attached exec. Loaded by src/sandbox/helper.ts through src/assets.ts, which
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
#   worker -> helper   S spawn (JSON {argv, user "uid:gid", env ["K=V"], cwd}); D stdin bytes;
#                      E close stdin; C drop the channel (its pipes closed: it reads EOF and gets
#                      SIGPIPE, as a closed exec stream); A u32: output bytes the worker consumed.
#   helper -> worker   O stdout bytes; e stderr bytes; a u32: stdin bytes written to the child (or
#                      dropped: it stopped reading); Z output ended (both pipes at EOF); X exit
#                      (JSON {code}: -signal as 128+n, as a shell says it).
# Flow: at most WINDOW bytes of a channel's output are out unacknowledged (then its pipes are not
# read and the child blocks, as a paused exec stream), and the worker keeps at most WINDOW of its
# stdin unacknowledged: the helper never blocks on a child and its buffers are bounded.
# A spawn that fails (no such program, the pids limit) is a channel that prints why on stderr and
# exits 127 (not found) or 126. Stdin at EOF (the worker went): every pipe closed, and it exits.
import os, sys, json, struct, selectors, signal, subprocess, pwd, errno
VERSION = 1
WINDOW = 1 << 20
CHUNK = 64 << 10
HEAD = struct.Struct(">BII")
BASE_ENV = dict(os.environ)
os.umask(0o022)
sel = selectors.DefaultSelector()
chans = {}
reaping = {}  # pid -> Popen of dropped channels, still to be reaped

def out(kind, cid, body=b""):
    data = HEAD.pack(ord(kind), cid, len(body)) + body
    mv = memoryview(data)
    while mv: mv = mv[os.write(1, mv):]

class Chan:
    def __init__(self, cid):
        self.cid, self.proc, self.code = cid, None, None
        self.inq, self.in_fd, self.in_eof, self.in_dead = bytearray(), None, False, False
        self.fds, self.watched, self.unacked, self.ended = {}, set(), 0, False

def watch(ch):
    # Output pipes are read while the window has room; stdin's is watched while bytes wait for it.
    for fd in list(ch.fds):
        want = ch.unacked < WINDOW
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

def finish(ch):
    # Output ended and the child reaped: the channel's last frames.
    if ch.ended and ch.code is not None and ch.cid in chans:
        out("X", ch.cid, json.dumps({"code": ch.code}).encode())
        close_in(ch); del chans[ch.cid]

def reap():
    for ch in list(chans.values()):
        if ch.proc is not None and ch.code is None:
            c = ch.proc.poll()
            if c is not None:
                ch.code = c if c >= 0 else 128 - c
                finish(ch)
    for pid, p in list(reaping.items()):
        if p.poll() is not None: del reaping[pid]

def spawn(ch, req):
    pipes = []
    try:
        uid, _, gid = str(req.get("user", "0:0")).partition(":")
        uid, gid = int(uid), int(gid or uid)
        env = dict(BASE_ENV)
        for kv in req.get("env", []):
            k, _, v = kv.partition("=")
            env[k] = v
        if not any(kv.startswith("HOME=") for kv in req.get("env", [])):
            try: env["HOME"] = pwd.getpwuid(uid).pw_dir
            except KeyError: env["HOME"] = "/"
        pipes = [os.pipe() for _ in range(3)]
        ch.proc = subprocess.Popen(req["argv"], stdin=pipes[0][0], stdout=pipes[1][1], stderr=pipes[2][1], cwd=req.get("cwd", "/workspace"), env=env,
                                   user=uid, group=gid, extra_groups=[gid], start_new_session=True, close_fds=True)
    except Exception as e:
        for r, w in pipes: os.close(r); os.close(w)
        name = (req.get("argv") or [""])[0] if isinstance(req, dict) else ""
        msg = "patchbay helper: cannot start %r: %s\n" % (name, getattr(e, "strerror", None) or e)
        out("e", ch.cid, msg.encode("utf-8", "replace")); out("Z", ch.cid)
        ch.ended, ch.code = True, (127 if getattr(e, "errno", None) in (errno.ENOENT, errno.ENOTDIR) else 126)
        return finish(ch)
    os.close(pipes[0][0]); os.close(pipes[1][1]); os.close(pipes[2][1])
    ch.in_fd = pipes[0][1]
    ch.fds = {pipes[1][0]: "O", pipes[2][0]: "e"}
    for fd in (ch.in_fd, *ch.fds): os.set_blocking(fd, False)
    watch(ch)

def drop(ch):
    # The worker is done with it: its pipes closed, nothing more said of it.
    for fd in list(ch.fds):
        if fd in ch.watched: sel.unregister(fd)
        os.close(fd)
    ch.fds, ch.watched = {}, set()
    close_in(ch)
    if ch.proc is not None and ch.code is None: reaping[ch.proc.pid] = ch.proc
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
        else: ch.inq += body
    elif kind == "E": ch.in_eof = True
    elif kind == "A": ch.unacked = max(0, ch.unacked - struct.unpack(">I", body[:4])[0])
    elif kind == "C": return drop(ch)
    watch(ch)

def on_output(ch, fd):
    if ch.unacked >= WINDOW: return watch(ch)
    try: b = os.read(fd, min(CHUNK, WINDOW - ch.unacked))
    except BlockingIOError: return
    except OSError: b = b""
    if b:
        ch.unacked += len(b)
        out(ch.fds[fd], ch.cid, b)
    else:
        if fd in ch.watched: sel.unregister(fd); ch.watched.discard(fd)
        del ch.fds[fd]; os.close(fd)
        if not ch.fds:
            ch.ended = True
            out("Z", ch.cid)
            reap(); finish(ch); return
    watch(ch)

def on_input(ch):
    n = 0
    try:
        while ch.inq:
            k = os.write(ch.in_fd, ch.inq[:CHUNK])
            del ch.inq[:k]; n += k
    except BlockingIOError: pass
    except OSError:
        # It stopped reading (exited, or closed its stdin): what waits is dropped, and acknowledged.
        n += len(ch.inq); ch.inq.clear(); ch.in_dead = True; ch.in_eof = True
    if n: out("a", ch.cid, struct.pack(">I", n))
    if not ch.inq and ch.in_eof: close_in(ch)
    else: watch(ch)

def main():
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False); os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    sel.register(wake_r, selectors.EVENT_READ, None)
    sel.register(0, selectors.EVENT_READ, "stdin")
    sys.stdout.write("PBREADY:%d\n" % os.getpid()); sys.stdout.flush()
    buf = bytearray()
    while True:
        for key, _ in sel.select():
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
                while len(buf) >= HEAD.size:
                    t, cid, n = HEAD.unpack_from(buf)
                    if len(buf) < HEAD.size + n: break
                    body = bytes(buf[HEAD.size:HEAD.size + n]); del buf[:HEAD.size + n]
                    on_frame(chr(t), cid, body)
            else:
                ch, fd = key.data
                if ch.cid not in chans: continue
                if fd == -1:
                    if ch.in_fd is not None: on_input(ch)
                elif fd in ch.fds: on_output(ch, fd)

main()
