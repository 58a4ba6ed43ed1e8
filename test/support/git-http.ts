// A smart-HTTP git server on 127.0.0.1 that requires basic auth: node's http in front of git's own
// `git http-backend` (CGI) serving the bare repos under a root. It records every request's
// Authorization header, so a test can tell which credentials reached it (and that none reached a
// server that should have had none). A server can take several users, each with read or write rights:
// a reader gets 403 on git-receive-pack, a writer's pushes are served (http.receivepack).
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface GitHttpServer {
  url: string;
  /** host:port, as git's credential protocol names it. */
  host: string;
  /** Every request: method, path, the Authorization header it came with ("" for none), and the user it was (if any). */
  requests: { method: string; path: string; authorization: string; user?: string }[];
  /** Requests that passed the auth check. */
  authorized(): number;
  close(): Promise<void>;
}

export interface GitHttpOptions {
  /** The one user:password accepted (it may push); undefined: no auth at all (unless `users`). */
  auth?: { username: string; password: string };
  /** Users accepted beside `auth`: a reader is refused git-receive-pack with 403, a writer may push. */
  users?: GitHttpUser[];
  /** Answer every request with a 302 to this base URL instead (a redirect to another host). */
  redirectTo?: string;
}

export interface GitHttpUser {
  username: string;
  password: string;
  rights: "read" | "write";
}

const basic = (u: { username: string; password: string }) =>
  `Basic ${Buffer.from(`${u.username}:${u.password}`).toString("base64")}`;

export async function startGitHttp(root: string, opts: GitHttpOptions = {}): Promise<GitHttpServer> {
  const requests: GitHttpServer["requests"] = [];
  let ok = 0;
  const users = [...(opts.auth ? [{ ...opts.auth, rights: "write" as const }] : []), ...(opts.users ?? [])];
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    const user = users.find((x) => req.headers.authorization === basic(x));
    requests.push({
      method: req.method ?? "",
      path: u.pathname,
      authorization: req.headers.authorization ?? "",
      ...(user ? { user: user.username } : {}),
    });
    if (opts.redirectTo)
      return void res.writeHead(302, { location: `${opts.redirectTo}${u.pathname}${u.search}` }).end();
    if (users.length && !user)
      return void res.writeHead(401, { "www-authenticate": 'Basic realm="patchbay-test"' }).end();
    const receive = u.pathname.endsWith("/git-receive-pack") || u.searchParams.get("service") === "git-receive-pack";
    if (receive && user?.rights !== "write") return void res.writeHead(403).end("read-only\n");
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
        // A writer's pushes are served (http-backend takes them from an authenticated user only).
        ...(user ? { REMOTE_USER: user.username } : {}),
        ...(user?.rights === "write"
          ? { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "http.receivepack", GIT_CONFIG_VALUE_0: "true" }
          : {}),
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
