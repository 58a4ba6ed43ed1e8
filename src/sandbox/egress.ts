// The sandbox's side of setup-phase egress. The container keeps NetworkMode none; the worker's
// proxy socket lives in a per-job host directory bind-mounted read-only at create time (a mount
// cannot be added later), and a small root process in the container bridges a loopback port to
// it for as long as setup runs. Closing the bridge's stdin ends it; the agent (uid 1000) can
// neither signal it nor connect to the socket itself (mode 0600, root's).
import type { Attached, Box, BoxSpec } from "../runtime/types.js";

/** Where the per-job directory appears in the container. */
export const EGRESS_MOUNT = "/patchbay-egress";
export const EGRESS_SOCKET = `${EGRESS_MOUNT}/proxy.sock`;

export function egressMount(hostDir: string): NonNullable<BoxSpec["mounts"]>[number] {
  return { source: hostDir, target: EGRESS_MOUNT };
}

// One thread, non-blocking, with backpressure (a side is not read while its peer's buffer is
// full). Threads would count against the pids limit. A probe connection first tells whether the
// runtime lets the container reach a host socket at all (gVisor needs --host-uds=open).
const BRIDGE = String.raw`
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
`;

export class EgressBridgeError extends Error {}

/** The running bridge: `port` is its loopback port in the container. */
export interface EgressBridge {
  port: number;
  stop(): Promise<void>;
}

export async function startEgressBridge(box: Box, maxConnections: number): Promise<EgressBridge> {
  let out = "";
  let proc: Attached | undefined;
  const first = new Promise<string>((resolve) => {
    void box.attach(["python3", "-I", "-S", "-c", BRIDGE, EGRESS_SOCKET, String(maxConnections)], (chunk) => {
      out += chunk.toString("utf8");
      if (out.includes("\n") || out.length > 4096) resolve(out);
    }, { user: "0:0", cwd: "/" }).then((p) => {
      proc = p;
      void p.ended.then(() => resolve(out));
    }, (err: Error) => resolve(`error ${err.message}\n`));
  });
  const line = (await first).split("\n")[0] ?? "";
  const m = /^port (\d+)$/.exec(line);
  const stop = async () => {
    if (!proc) return;
    proc.endInput();
    const ended = await Promise.race([proc.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5000).unref())]);
    if (!ended) proc.destroy();
    await proc.ended;
  };
  if (!m) {
    await stop();
    throw new EgressBridgeError(`the setup network bridge could not start: ${line.replace(/^error /, "") || "no output"}`);
  }
  return { port: Number(m[1]), stop };
}
