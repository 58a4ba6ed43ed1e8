// A test host in its own network namespace (ip netns + a veth pair), reachable from this machine
// at a private address, running a small HTTP server: /ok, /slow, /hang (never answers),
// /redirect?to=URL, /big?n=BYTES, /headers (the request's headers as JSON). Tests reach no other host than these and loopback.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";

const SERVER = String.raw`
import sys, time, threading, json
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlparse, parse_qs
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body=b"", headers={}):
        self.send_response(code)
        for k, v in headers.items(): self.send_header(k, v)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        u = urlparse(self.path); q = parse_qs(u.query)
        if u.path == "/ok": self.send(200, ("hello from netns, host header " + self.headers.get("Host", "")).encode())
        elif u.path == "/slow": time.sleep(float(q.get("s", ["0.5"])[0])); self.send(200, b"slow ok")
        elif u.path == "/hang": time.sleep(3600)
        elif u.path == "/redirect": self.send(302, b"", {"Location": q["to"][0]})
        elif u.path == "/big": self.send(200, b"x" * int(q["n"][0]))
        elif u.path == "/headers": self.send(200, json.dumps({k.lower(): v for k, v in self.headers.items()}).encode())
        else: self.send(404, b"no")
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 1024
s = ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H)
print("ready", flush=True)
s.serve_forever()
`;

export interface NetHost {
  ip: string;
  port: number;
  close(): void;
}

const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "pipe", "pipe"] });

/** A namespace with an HTTP server on 10.213.N.2:8080 (N from this process's pid and `index`). */
export async function startNetHost(index = 0): Promise<NetHost> {
  const n = (process.pid * 7 + index) % 250;
  const tag = `${process.pid % 100000}${index}`;
  const [ns, vh, vn] = [`pbeg${tag}`, `pbh${tag}`, `pbn${tag}`];
  const [hostIp, nsIp] = [`10.213.${n}.1`, `10.213.${n}.2`];
  const cleanup = () => {
    try {
      ip("netns", "del", ns);
    } catch {
      /* gone */
    }
    try {
      ip("link", "del", vh);
    } catch {
      /* gone with the namespace */
    }
  };
  cleanup();
  ip("netns", "add", ns);
  ip("link", "add", vh, "type", "veth", "peer", "name", vn);
  ip("link", "set", vn, "netns", ns);
  ip("addr", "add", `${hostIp}/30`, "dev", vh);
  ip("link", "set", vh, "up");
  ip("netns", "exec", ns, "ip", "addr", "add", `${nsIp}/30`, "dev", vn);
  ip("netns", "exec", ns, "ip", "link", "set", vn, "up");
  ip("netns", "exec", ns, "ip", "link", "set", "lo", "up");
  const server: ChildProcess = spawn("ip", ["netns", "exec", ns, "python3", "-c", SERVER, nsIp, "8080"], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  await new Promise<void>((resolve, reject) => {
    server.stdout!.once("data", () => resolve());
    server.once("exit", (code) => reject(new Error(`netns server exited ${code}`)));
  });
  return {
    ip: nsIp,
    port: 8080,
    close: () => {
      server.kill("SIGKILL");
      cleanup();
    },
  };
}
