// A smart-HTTP git server on 127.0.0.1 that requires basic auth: node's http in front of git's own
// `git http-backend` (CGI) serving the bare repos under a root. It records every request's
// Authorization header, so a test can tell which credentials reached it (and that none reached a
// server that should have had none).
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface GitHttpServer {
  url: string;
  /** host:port, as git's credential protocol names it. */
  host: string;
  /** Every request: method, path and the Authorization header it came with ("" for none). */
  requests: { method: string; path: string; authorization: string }[];
  /** Requests that passed the auth check. */
  authorized(): number;
  close(): Promise<void>;
}

export interface GitHttpOptions {
  /** The one user:password accepted; undefined: no auth at all. */
  auth?: { username: string; password: string };
  /** Answer every request with a 302 to this base URL instead (a redirect to another host). */
  redirectTo?: string;
}

export async function startGitHttp(root: string, opts: GitHttpOptions = {}): Promise<GitHttpServer> {
  const requests: GitHttpServer["requests"] = [];
  let ok = 0;
  const expected = opts.auth && `Basic ${Buffer.from(`${opts.auth.username}:${opts.auth.password}`).toString("base64")}`;
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    requests.push({ method: req.method ?? "", path: u.pathname, authorization: req.headers.authorization ?? "" });
    if (opts.redirectTo) return void res.writeHead(302, { location: `${opts.redirectTo}${u.pathname}${u.search}` }).end();
    if (expected && req.headers.authorization !== expected) return void res.writeHead(401, { "www-authenticate": 'Basic realm="patchbay-test"' }).end();
    ok++;
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        PATH_INFO: decodeURIComponent(u.pathname),
        QUERY_STRING: u.search.slice(1),
        REQUEST_METHOD: req.method ?? "GET",
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        REMOTE_ADDR: "127.0.0.1",
        ...(opts.auth ? { REMOTE_USER: opts.auth.username } : {}),
        ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
        ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
        ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
      },
      stdio: ["pipe", "pipe", "ignore"],
    });
    req.pipe(cgi.stdin);
    // The CGI's answer: headers (a Status: line among them), a blank line, the body.
    let head = Buffer.alloc(0);
    let sent = false;
    cgi.stdout.on("data", (d: Buffer) => {
      if (sent) return void res.write(d);
      head = Buffer.concat([head, d]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      sent = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString("latin1").split("\r\n")) {
        const i = line.indexOf(":");
        const [k, v] = [line.slice(0, i).trim(), line.slice(i + 1).trim()];
        if (k.toLowerCase() === "status") status = Number.parseInt(v, 10);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.stdout.on("end", () => (sent ? res.end() : res.writeHead(500).end()));
    cgi.on("error", () => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `http://${host}`,
    host,
    requests,
    authorized: () => ok,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
