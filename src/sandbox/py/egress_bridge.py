# egress_bridge.py: during setup only, bridges a loopback port in the sandbox to the worker's egress
# proxy socket mounted at argv[1] (at most argv[2] connections at once); run as root
# (python3 -I -S) by src/sandbox/egress.ts. Prints "port N" once listening ("error ..." if the
# socket cannot be reached: gVisor needs --host-uds=open); ends when its stdin closes.
# One thread, non-blocking, with backpressure (a side is not read while its peer's buffer is
# full): threads would count against the pids limit.
import os, selectors, socket, sys
SOCK, MAX = sys.argv[1], int(sys.argv[2])
R, W = selectors.EVENT_READ, selectors.EVENT_WRITE
try:
    p = socket.socket(socket.AF_UNIX); p.connect(SOCK); p.close()
except OSError as e:
    sys.stdout.write("error %s\n" % e); sys.stdout.flush(); sys.exit(1)
sel = selectors.DefaultSelector()
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0)); srv.listen(128); srv.setblocking(False)
sel.register(srv, R, None); sel.register(0, R, None)
sys.stdout.write("port %d\n" % srv.getsockname()[1]); sys.stdout.flush()
class End:
    def __init__(s, sock): s.sock, s.buf, s.eof, s.peer, s.ev = sock, b"", False, None, 0
ends = set()
def want(e):
    ev = (0 if e.eof or len(e.peer.buf) > 262144 else R) | (W if e.buf else 0)
    if ev == e.ev: return
    if e.ev and ev: sel.modify(e.sock, ev, e)
    elif ev: sel.register(e.sock, ev, e)
    else: sel.unregister(e.sock)
    e.ev = ev
def close(e):
    for x in (e, e.peer):
        if x in ends:
            ends.discard(x)
            if x.ev: sel.unregister(x.sock)
            x.sock.close()
def shut(e):
    try: e.sock.shutdown(socket.SHUT_WR)
    except OSError: pass
while True:
    for key, ev in sel.select():
        e = key.data
        if key.fileobj == 0:
            if not os.read(0, 4096): os._exit(0)
            continue
        if e is None:
            try: c, _ = srv.accept()
            except OSError: continue
            u = socket.socket(socket.AF_UNIX)
            try:
                if len(ends) >= 2 * MAX: raise OSError("too many connections")
                u.connect(SOCK)
            except OSError:
                c.close(); u.close(); continue
            c.setblocking(False); u.setblocking(False)
            a, b = End(c), End(u); a.peer, b.peer = b, a; ends.update((a, b)); want(a); want(b)
            continue
        if e not in ends: continue
        try:
            if ev & R:
                d = e.sock.recv(65536)
                if d: e.peer.buf += d
                else:
                    e.eof = True
                    if not e.peer.buf: shut(e.peer)
            if ev & W and e.buf:
                n = e.sock.send(e.buf); e.buf = e.buf[n:]
                if not e.buf and e.peer.eof: shut(e)
        except OSError:
            close(e); continue
        if e.eof and e.peer.eof and not e.buf and not e.peer.buf: close(e); continue
        want(e); want(e.peer)
