// A smart-HTTP git server on 127.0.0.1 that requires basic auth: node's http in front of git's own
// `git http-backend` (CGI) serving the bare repos under a root. It records every request's
// Authorization header, so a test can tell which credentials reached it (and that none reached a
// server that should have had none). A server can take several users, each with read or write rights:
// a reader gets 403 on git-receive-pack, a writer's pushes are served (http.receivepack).
// With `tls` it serves HTTPS instead, on port 443 of a loopback address of its own
// (127.218.<pid % 250>.<index + 1>), with a certificate for a test name (e.g. "git.test") that a
// CA made for it signs (test-ca.ts): a client must trust that CA, and map the name to the address
// (git's http.curloptResolve on this host; the egress proxy's test-only `resolve` for a sandbox).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestCertificate } from "./test-ca.js";

export interface GitHttpServer {
  /** Its base URL: `http://127.0.0.1:PORT`, or with `tls` `https://NAME` (port 443). */
  url: string;
  /** host:port, as git's credential protocol names it (with `tls`, the name alone: the port is 443). */
  host: string;
  /** With `tls`: the loopback address it listens on, the CA that signed its certificate (PEM) and that PEM's file. */
  tls?: { ip: string; caPem: string; caFile: string };
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
  /** Serve HTTPS for this name on port 443 of an address of its own instead of plain HTTP on 127.0.0.1. */
  tls?: GitHttpTls;
}

/** The name and address of an HTTPS git server. */
export interface GitHttpTls {
  /** The name its certificate is for and its URL carries (e.g. "git.test"). */
  name: string;
  /** Which of this process's HTTPS git servers: its address is 127.218.<pid % 250>.<index + 1>. @default 0 */
  index?: number;
}

export interface GitHttpUser {
  username: string;
  password: string;
  rights: "read" | "write";
}

const basic = (u: { username: string; password: string }) =>
  `Basic ${Buffer.from(`${u.username}:${u.password}`).toString("base64")}`;

/** Starts a server for the bare repositories under `root` (plain HTTP on 127.0.0.1 unless `tls`). */
export async function startGitHttp(root: string, opts: GitHttpOptions = {}): Promise<GitHttpServer> {
  const requests: GitHttpServer["requests"] = [];
  let ok = 0;
  const users = [...(opts.auth ? [{ ...opts.auth, rights: "write" as const }] : []), ...(opts.users ?? [])];
  const handler: http.RequestListener = (req, res) => {
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
  };
  const served = opts.tls ? await listenTls(opts.tls, handler) : await listenPlain(handler);
  return { ...served, requests, authorized: () => ok };
}

type Listening = Pick<GitHttpServer, "url" | "host" | "tls" | "close">;

const closer =
  (server: http.Server, after = () => {}) =>
  () =>
    new Promise<void>((resolve) => {
      server.close(() => (after(), resolve()));
      server.closeAllConnections();
    });

async function listenPlain(handler: http.RequestListener): Promise<Listening> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: `http://${host}`, host, close: closer(server) };
}

// HTTPS for one name on port 443 of the server's own loopback address; the certificate's files
// live in a temporary directory until the server closes (a client reads the CA's file).
async function listenTls(tls: GitHttpTls, handler: http.RequestListener): Promise<Listening> {
  const ip = `127.218.${process.pid % 250}.${(tls.index ?? 0) + 1}`;
  const dir = mkdtempSync(join(tmpdir(), "pb-git-tls-"));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    const cert = makeTestCertificate(dir, [tls.name], [ip]);
    const server = https.createServer({ key: cert.key, cert: cert.cert }, handler);
    server.on("tlsClientError", () => {}); // a client that distrusts the CA hangs up mid-handshake
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(443, ip, () => resolve()));
    return {
      url: `https://${tls.name}`,
      host: tls.name,
      tls: { ip, caPem: cert.caPem, caFile: cert.caFile },
      close: closer(server, remove),
    };
  } catch (e) {
    remove();
    throw e;
  }
}
