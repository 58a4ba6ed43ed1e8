// The egress proxy adds a credential without the sandbox ever holding it (issue 46), through the
// real proxy on its Unix socket and a real HTTPS registry on a loopback address of this test's own
// that requires the token. For the credential's host the proxy ends TLS with the job CA's leaf and
// sets the header (a placeholder the client sent never reaches the registry); another host is a
// plain tunnel; another SNI, another Host, HTTP/2 and a redirect get the token nowhere else; an
// upstream whose certificate is not trusted is a 502; an upstream echoing the header (plain or
// gzip) shows the client only stars; records carry the path without query and the credential's
// name, never its value; the CA files are readable by uid 1000 through a bind mount of the
// session's directory while its socket is not; curl, a real client, offering HTTP/2, gets the same.
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllowEntry, type AllowRule } from "../../src/core/allow.js";
import type { EgressCredential } from "../../src/net/credential.js";
import { EgressProxy, type EgressLimits, type EgressRecord, type EgressSession } from "../../src/net/proxy.js";
import { connect, readAll, until } from "../support/egress-client.js";

const TOKEN = "npm_T0k3nThatMustNeverLeak42";
const PLACEHOLDER = "Bearer PATCHBAY_PLACEHOLDER";
const IP = `127.216.${process.pid % 250}.1`;
const NAMES = ["registry.test", "other.test", "untrusted.test", "evil.test"];

interface Seen {
  host: string;
  url: string;
  authorization?: string;
}
const seen: Seen[] = [];
const resolved: string[] = [];
let cert = "";
const servers: (http.Server | https.Server)[] = [];
const dirs: string[] = [];

/** The registry: /pkg needs the token; /echo401[?gz|br] answers 401 quoting the header; /redirect 302s to evil.test. */
function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  const auth = req.headers.authorization;
  seen.push({
    host: req.headers.host ?? "",
    url: req.url ?? "",
    ...(auth !== undefined ? { authorization: auth } : {}),
  });
  const url = new URL(req.url ?? "/", "https://x");
  if (url.pathname === "/redirect") return void res.writeHead(302, { location: "https://evil.test/steal" }).end();
  if (url.pathname === "/echo401") {
    const body = Buffer.from(`{"error":"bad credentials: ${auth ?? ""}","token":"${TOKEN}"}`);
    const enc = url.searchParams.get("enc");
    const out = enc === "gzip" ? zlib.gzipSync(body) : enc === "br" ? zlib.brotliCompressSync(body) : body;
    return void res
      .writeHead(401, {
        "content-type": "application/json",
        "www-authenticate": `Bearer realm="${TOKEN}"`,
        "content-length": out.length,
        ...(enc ? { "content-encoding": enc } : {}),
      })
      .end(out);
  }
  if (auth !== `Bearer ${TOKEN}`) return void res.writeHead(401).end("no");
  const body = `ok ${req.method} ${req.url} host=${req.headers.host} auth=${auth}`;
  res.writeHead(200, { "content-type": "text/plain", "content-length": Buffer.byteLength(body) }).end(body);
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "pb-cred-"));
  dirs.push(dir);
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-subj", "/CN=registry.test",
      "-addext", `subjectAltName=${NAMES.map((n) => `DNS:${n}`).join(",")}`], // prettier-ignore
    { stdio: "ignore" },
  );
  cert = readFileSync(join(dir, "cert.pem"), "utf8");
  const key = readFileSync(join(dir, "key.pem"), "utf8");
  servers.push(https.createServer({ key, cert }, answer), http.createServer(answer));
  await Promise.all(
    servers.map((s, i) => new Promise<void>((r, j) => s.once("error", j).listen(i === 0 ? 443 : 80, IP, () => r()))),
  );
});
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ALLOW = ["registry.test", "other.test", "untrusted.test"].map((e) => parseAllowEntry(e) as AllowRule);
const registry = (): EgressCredential => ({
  name: "npm-private",
  host: "registry.test",
  port: 443,
  header: "authorization",
  value: `Bearer ${TOKEN}`,
  secrets: [`Bearer ${TOKEN}`, TOKEN],
  ca: cert,
});
const untrusted: EgressCredential = { ...registry(), name: "no-ca", host: "untrusted.test", ca: undefined };
delete (untrusted as { ca?: string }).ca;

async function open(limits: Partial<EgressLimits> = {}): Promise<{ s: EgressSession; recs: EgressRecord[] }> {
  const p = new EgressProxy({
    limits,
    allowPrivate: [`${IP}/32`],
    resolve: async (h) => {
      resolved.push(h);
      if (NAMES.includes(h)) return [IP];
      throw Object.assign(new Error("no such host"), { code: "ENOTFOUND" });
    },
  });
  const recs: EgressRecord[] = [];
  const s = p.session(ALLOW, (r) => recs.push(r), [registry(), untrusted]);
  dirs.push(s.dir);
  await s.listen();
  return { s, recs };
}

interface Answer {
  status?: number;
  headers?: http.IncomingHttpHeaders;
  body?: string;
  alpn?: string | false | null;
  error?: string;
}

/** CONNECT `target`, TLS over it with `servername` trusting `ca`, then one HTTP/1.1 request. */
async function through(
  s: EgressSession,
  target: string,
  o: {
    servername: string;
    ca: string;
    path?: string;
    host?: string;
    headers?: http.OutgoingHttpHeaders;
    alpn?: string[];
    tls?: tls.ConnectionOptions;
    /** Written as it is after the handshake in place of a request; the answer is all that comes back. */
    raw?: string;
  },
): Promise<Answer> {
  const t = await connect(s, target);
  if (!t.ok) return { status: t.status, error: t.body };
  const sock = tls.connect({
    socket: t.socket,
    servername: o.servername,
    ca: o.ca,
    ...(o.alpn ? { ALPNProtocols: o.alpn } : {}),
    ...o.tls,
  });
  const secured = await new Promise<string | undefined>((resolve) => {
    sock.once("secureConnect", () => resolve(undefined));
    sock.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    sock.once("close", () => resolve("closed"));
  });
  if (secured) {
    t.socket.destroy();
    return { error: secured };
  }
  const alpn = sock.alpnProtocol;
  if (o.raw !== undefined) {
    sock.write(o.raw);
    return { body: await readAll(sock) };
  }
  return new Promise((resolve) => {
    const req = http.request(
      {
        createConnection: () => sock,
        path: o.path ?? "/pkg",
        headers: { host: o.host ?? o.servername, connection: "close", ...o.headers },
      },
      (res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body, alpn }));
        res.on("error", (e) => resolve({ error: e.message }));
      },
    );
    req.on("error", (e) => resolve({ error: e.message, alpn }));
    req.end();
  });
}

const caOf = (s: EgressSession) => readFileSync(join(s.dir, s.caPath!), "utf8");
const stars = (n: number) => "*".repeat(n);

describe("a credential's host: the proxy ends TLS and sets the header", () => {
  it("sets the token in place of the client's placeholder; the registry sees it, the client never does", async () => {
    const { s, recs } = await open();
    try {
      const before = seen.length;
      const r = await through(s, "registry.test:443", {
        servername: "registry.test",
        ca: caOf(s),
        path: "/pkg/-/pkg-1.0.0.tgz?write=true&token=abc",
        headers: { authorization: PLACEHOLDER },
      });
      expect(r.status).toBe(200);
      expect(seen.slice(before)).toEqual([
        { host: "registry.test", url: "/pkg/-/pkg-1.0.0.tgz?write=true&token=abc", authorization: `Bearer ${TOKEN}` },
      ]);
      // The registry echoed the header it got: the client reads stars of the same length.
      expect(r.body).toBe(
        `ok GET /pkg/-/pkg-1.0.0.tgz?write=true&token=abc host=registry.test auth=${stars(7 + TOKEN.length)}`,
      );
      expect(Number(r.headers!["content-length"])).toBe(r.body!.length);
      expect(JSON.stringify(seen)).not.toContain("PATCHBAY_PLACEHOLDER");
      await until(() => recs.length === 1);
      expect(recs[0]).toMatchObject({
        host: "registry.test",
        port: 443,
        method: "GET",
        path: "/pkg/-/pkg-1.0.0.tgz",
        status: 200,
        allowed: true,
        credential: "npm-private",
        address: IP,
      });
      expect(recs[0]!.bytesDown).toBe(r.body!.length);
      expect(JSON.stringify(recs)).not.toContain(TOKEN);
    } finally {
      await s.close();
    }
  });

  it("twenty requests one after another on one tunnel reuse one upstream connection without piling a listener per request on it", async () => {
    const { s, recs } = await open();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      const t = await connect(s, "registry.test:443");
      if (!t.ok) throw new Error(`CONNECT refused: ${t.status} ${t.body}`);
      const sock = tls.connect({ socket: t.socket, servername: "registry.test", ca: caOf(s) });
      await new Promise((resolve, reject) => sock.once("secureConnect", resolve).once("error", reject));
      let got = "";
      sock.on("data", (c: Buffer) => (got += c.toString("latin1")));
      const answered = (n: number) => (got.match(/auth=\*+/g) ?? []).length >= n;
      for (let i = 1; i <= 20; i++) {
        sock.write(`GET /pkg HTTP/1.1\r\nHost: registry.test\r\n\r\n`);
        await until(() => answered(i));
      }
      sock.destroy();
      expect(got.match(/HTTP\/1\.1 200 /g)).toHaveLength(20);
      await until(() => recs.length === 20);
      await new Promise((resolve) => setImmediate(resolve)); // a warning is emitted on the next tick
      expect(warnings.filter((w) => w.includes("MaxListenersExceeded"))).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await s.close();
    }
  });

  it("writes ca.pem and ca-bundle.pem (the system's roots and the job CA), readable by uid 1000 through a mount; the socket is not", async () => {
    const { s } = await open();
    const mnt = mkdtempSync(join(tmpdir(), "pb-mnt-"));
    dirs.push(mnt);
    try {
      expect([s.caPath, s.caBundlePath]).toEqual(["ca.pem", "ca-bundle.pem"]);
      const mode = (p: string) => statSync(p).mode & 0o777;
      expect(mode(s.dir)).toBe(0o755);
      expect(mode(join(s.dir, "ca.pem"))).toBe(0o644);
      expect(mode(join(s.dir, "ca-bundle.pem"))).toBe(0o644);
      expect(mode(s.socketPath)).toBe(0o600);
      expect(mode(join(s.dir, ".."))).toBe(0o700);
      const bundle = readFileSync(join(s.dir, "ca-bundle.pem"), "utf8");
      expect(bundle.endsWith(caOf(s))).toBe(true);
      expect(bundle).toContain(tls.rootCertificates[0]!);
      expect(bundle + caOf(s)).not.toMatch(/PRIVATE KEY/);
      // As in the sandbox: the session's directory bind-mounted read-only, read by uid 1000.
      const asUser = (cmd: string) =>
        spawnSync("unshare", [
          "-m",
          "sh",
          "-c",
          `mount --bind -o ro "$0" "$1" && setpriv --reuid 1000 --regid 1000 --clear-groups sh -c "$2"`,
          s.dir,
          mnt,
          cmd,
        ]);
      const read = asUser(`cat ${mnt}/ca.pem ${mnt}/ca-bundle.pem >/dev/null && echo readable`);
      expect(read.stdout.toString()).toBe("readable\n");
      const sock = asUser(
        `python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('${mnt}/proxy.sock')" 2>&1 || true`,
      );
      expect(sock.stdout.toString()).toMatch(/PermissionError/);
      // On the host, the base directory (0700) keeps every other user out.
      const host = spawnSync("setpriv", [
        "--reuid",
        "1000",
        "--regid",
        "1000",
        "--clear-groups",
        "cat",
        join(s.dir, "ca.pem"),
      ]);
      expect(host.status).not.toBe(0);
    } finally {
      await s.close();
    }
  });

  it("a session refuses two credentials for one host:port", () => {
    const p = new EgressProxy();
    expect(() => p.session(ALLOW, () => {}, [registry(), { ...registry(), name: "again" }])).toThrow(
      "two credentials for registry.test:443: a host:port can have one only",
    );
  });

  it("plain HTTP to the credential's host gets no header", async () => {
    const { s } = await open();
    try {
      const before = seen.length;
      const r = await new Promise<number>((resolve, reject) =>
        http
          .request(
            { socketPath: s.socketPath, path: "http://registry.test/pkg", headers: { host: "registry.test" } },
            (res) => {
              res.resume();
              resolve(res.statusCode!);
            },
          )
          .on("error", reject)
          .end(),
      );
      expect(r).toBe(401);
      expect(seen.slice(before)).toEqual([{ host: "registry.test", url: "/pkg" }]);
    } finally {
      await s.close();
    }
  });
});

describe("the token reaches its own host and no other", () => {
  it("a CONNECT to another allowed host is a plain tunnel: the upstream's own certificate, no header added", async () => {
    const { s, recs } = await open();
    try {
      const before = seen.length;
      const r = await through(s, "other.test:443", {
        servername: "other.test",
        ca: cert,
        headers: { authorization: PLACEHOLDER },
      });
      expect(r.status).toBe(401);
      expect(seen.slice(before)).toEqual([{ host: "other.test", url: "/pkg", authorization: PLACEHOLDER }]);
      // The job's CA is not what it sees: a client trusting only ca.pem fails there.
      expect((await through(s, "other.test:443", { servername: "other.test", ca: caOf(s) })).error).toBe(
        "DEPTH_ZERO_SELF_SIGNED_CERT",
      );
      await until(() => recs.length === 2);
      expect(recs[0]).toMatchObject({ host: "other.test", method: "CONNECT", allowed: true });
      expect(recs[0]!.credential).toBeUndefined();
    } finally {
      await s.close();
    }
  });

  it("a TLS server name other than the CONNECT host, or none, is refused before anything is sent", async () => {
    const { s, recs } = await open();
    try {
      const before = seen.length;
      const other = await through(s, "registry.test:443", { servername: "other.test", ca: caOf(s) });
      expect(other.error).toBeDefined();
      // A client that checks no name at all gets as far as the handshake's end, and no further.
      const none = await through(s, "registry.test:443", {
        servername: "",
        ca: caOf(s),
        tls: { checkServerIdentity: () => undefined },
      });
      expect(none.status).toBeUndefined();
      expect(none.error).toBeDefined();
      expect(seen.length).toBe(before);
      await until(() => recs.length === 2);
      expect(recs[0]).toMatchObject({
        method: "CONNECT",
        allowed: false,
        credential: "npm-private",
        reason: "the TLS server name other.test is not the CONNECT host registry.test",
      });
      expect(recs[1]).toMatchObject({ allowed: false, reason: expect.stringMatching(/no SNI/) });
    } finally {
      await s.close();
    }
  });

  it("a Host for another name inside the terminated tunnel is a 421, sent nowhere; absolute-form, CONNECT and upgrades are refused", async () => {
    const { s, recs } = await open();
    try {
      const before = seen.length;
      for (const host of ["other.test", "registry.test:8443", "registry.test.evil.test"]) {
        const r = await through(s, "registry.test:443", { servername: "registry.test", ca: caOf(s), host });
        expect(r.status).toBe(421);
      }
      const ca = caOf(s);
      const raw = (text: string) => through(s, "registry.test:443", { servername: "registry.test", ca, raw: text });
      const absolute = await raw("GET https://other.test/x HTTP/1.1\r\nHost: registry.test\r\n\r\n");
      expect(absolute.body).toMatch(/^HTTP\/1\.1 400 [^]*only requests for a path/);
      const inner = await raw("CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n");
      expect(inner.body).toMatch(/^HTTP\/1\.1 400 [^]*CONNECT inside a terminated tunnel is refused/);
      const upgrade = await raw("GET / HTTP/1.1\r\nHost: registry.test\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n");
      expect(upgrade.body).toMatch(/^HTTP\/1\.1 400 [^]*protocol upgrades are not proxied/);
      const huge = await raw(`GET / HTTP/1.1\r\nHost: registry.test\r\nX-Big: ${"b".repeat(20_000)}\r\n\r\n`);
      expect(huge.body).toMatch(/^HTTP\/1\.1 431 /);
      expect(seen.length).toBe(before);
      await until(() => recs.length === 7);
      expect(recs[6]).toMatchObject({ allowed: false, reason: "request head too large", credential: "npm-private" });
      expect(recs[0]).toMatchObject({ allowed: false, status: 421, path: "/pkg", credential: "npm-private" });
      expect(recs[0]!.reason).toMatch(/Host "other\.test" is not the CONNECT host registry\.test/);
    } finally {
      await s.close();
    }
  });

  it("HTTP/2 is never spoken: ALPN picks http/1.1, and a client offering h2 alone is refused", async () => {
    const { s, recs } = await open();
    try {
      const both = await through(s, "registry.test:443", {
        servername: "registry.test",
        ca: caOf(s),
        alpn: ["h2", "http/1.1"],
      });
      expect(both).toMatchObject({ alpn: "http/1.1", status: 200 });
      const h2 = await through(s, "registry.test:443", { servername: "registry.test", ca: caOf(s), alpn: ["h2"] });
      expect(h2).toEqual({ error: "ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL" });
      await until(() => recs.length === 2);
      expect(recs[1]).toMatchObject({
        method: "CONNECT",
        allowed: false,
        reason: "TLS handshake failed: ERR_SSL_NO_APPLICATION_PROTOCOL",
      });
    } finally {
      await s.close();
    }
  });

  it("a 302 to another host is relayed as it is; the proxy goes nowhere", async () => {
    const { s } = await open();
    try {
      resolved.length = 0;
      const before = seen.length;
      const r = await through(s, "registry.test:443", { servername: "registry.test", ca: caOf(s), path: "/redirect" });
      expect(r.status).toBe(302);
      expect(r.headers!.location).toBe("https://evil.test/steal");
      expect(seen.slice(before).map((x) => x.host)).toEqual(["registry.test"]);
      expect(resolved).toEqual(["registry.test"]);
    } finally {
      await s.close();
    }
  });

  it("an upstream whose certificate is not trusted is a 502 that says why, without the secret", async () => {
    const { s, recs } = await open();
    try {
      const before = seen.length;
      const r = await through(s, "untrusted.test:443", { servername: "untrusted.test", ca: caOf(s) });
      expect(r.status).toBe(502);
      expect(r.body).toMatch(/upstream error: (DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)/);
      expect(seen.length).toBe(before);
      await until(() => recs.length === 1);
      expect(recs[0]).toMatchObject({
        host: "untrusted.test",
        credential: "no-ca",
        reason: expect.stringMatching(/SELF_SIGNED/),
      });
      expect(JSON.stringify(recs)).not.toContain(TOKEN);
    } finally {
      await s.close();
    }
  });

  it.each(["", "gzip", "br"])(
    "an upstream that echoes the header in a 401 (%s) shows the client only stars",
    async (enc) => {
      const { s, recs } = await open();
      try {
        const r = await through(s, "registry.test:443", {
          servername: "registry.test",
          ca: caOf(s),
          path: `/echo401${enc ? `?enc=${enc}` : ""}`,
          headers: { "accept-encoding": "gzip, br, zstd" },
        });
        expect(r.status).toBe(401);
        expect(r.body).toBe(`{"error":"bad credentials: ${stars(7 + TOKEN.length)}","token":"${stars(TOKEN.length)}"}`);
        expect(r.headers!["www-authenticate"]).toBe(`Bearer realm="${stars(TOKEN.length)}"`);
        expect(r.headers!["content-encoding"]).toBeUndefined();
        expect(JSON.stringify(r)).not.toContain(TOKEN);
        await until(() => recs.length === 1);
        expect(recs[0]).toMatchObject({ status: 401, path: "/echo401", credential: "npm-private" });
        expect(JSON.stringify(recs)).not.toContain(TOKEN);
      } finally {
        await s.close();
      }
    },
  );

  it("the job's byte budget ends a transfer inside a terminated tunnel", async () => {
    const { s, recs } = await open({ maxBytes: 20 });
    try {
      const r = await through(s, "registry.test:443", { servername: "registry.test", ca: caOf(s) });
      expect(r.body ?? "").not.toMatch(/^ok GET/);
      await until(() => recs.length === 1);
      expect(recs[0]!.reason).toBe("byte limit for the job");
    } finally {
      await s.close();
    }
  });
});

describe("a real client: curl through a loopback bridge to the session's socket (as the sandbox's bridge does)", () => {
  /** A loopback TCP port piped to the session's socket; curl runs with it as its proxy and trusts ca.pem only. */
  async function curl(s: EgressSession, args: string[]): Promise<{ code: number; out: string; err: string }> {
    const bridge = net.createServer((c) => {
      const u = net.connect(s.socketPath);
      c.pipe(u).pipe(c);
      u.on("error", () => c.destroy());
      c.on("error", () => u.destroy());
    });
    await new Promise<void>((r) => bridge.listen(0, "127.0.0.1", () => r()));
    const { port } = bridge.address() as net.AddressInfo;
    const ca = join(s.dir, s.caPath!);
    try {
      return await new Promise((resolve) =>
        execFile(
          "curl",
          [
            "-sS",
            "--noproxy",
            "",
            "--proxy",
            `http://127.0.0.1:${port}`,
            "--cacert",
            ca,
            "-w",
            "\n%{http_version}",
            ...args,
          ],
          { env: { PATH: process.env.PATH ?? "" } },
          (err, out, errOut) => resolve({ code: err ? Number(err.code ?? 1) : 0, out, err: errOut }),
        ),
      );
    } finally {
      bridge.close();
    }
  }

  it("curl offering HTTP/2 gets HTTP/1.1, its placeholder replaced, the echo starred, gzip decoded", async () => {
    const { s, recs } = await open();
    try {
      const before = seen.length;
      const ok = await curl(s, ["--http2", "-H", `Authorization: ${PLACEHOLDER}`, "https://registry.test/pkg?x=1"]);
      expect(ok.err).toBe("");
      expect(ok.out).toBe(`ok GET /pkg?x=1 host=registry.test auth=${stars(7 + TOKEN.length)}\n1.1`);
      expect(seen.slice(before)).toEqual([
        { host: "registry.test", url: "/pkg?x=1", authorization: `Bearer ${TOKEN}` },
      ]);
      const echo = await curl(s, ["--compressed", "https://registry.test/echo401?enc=gzip"]);
      expect(echo.out).toBe(
        `{"error":"bad credentials: ${stars(7 + TOKEN.length)}","token":"${stars(TOKEN.length)}"}\n1.1`,
      );
      // Another host is a plain tunnel: curl meets the upstream's own certificate, which ca.pem does not vouch for.
      const other = await curl(s, ["https://other.test/pkg"]);
      expect(other.code).not.toBe(0);
      expect(other.err).toMatch(/SSL certificate problem|self.signed/i);
      await until(() => recs.length === 3);
      expect(JSON.stringify(recs)).not.toContain(TOKEN);
    } finally {
      await s.close();
    }
  });
});
