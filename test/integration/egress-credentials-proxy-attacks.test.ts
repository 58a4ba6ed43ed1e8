// The red team of issue 46: a sandbox (hostile) and an upstream that echoes what it gets try to
// bring a credential's secret back through a terminated tunnel (src/net/terminate.ts), or to make
// the tunnel deliver more than the job's byte budget. Through the real proxy on its Unix socket
// and a real HTTPS upstream on a loopback address of this test's own. Found and fixed: a Range
// request cutting an echoed secret into parts, a transfer coding (gzip, chunked) passing coded
// bytes past the scrub, a decompression bomb's decoded bytes not charged, the upstream's
// Content-Encoding text recorded unscrubbed, and echoes percent-encoded, JSON-escaped or in the
// Latin-1 bytes the header went out in, and a flood of pipelined requests (thousands at once in
// memory, each sent with the credential) whose heads the byte budget did not count. Held: the reason phrase, trailers and 1xx responses are
// the proxy's own or not relayed; smuggled framing (CL+TE, two lengths, obs-fold) never leaves.
// A closed tunnel held its connection slot until the idle limit (the proxy's side stayed half
// open), so a client opening and closing tunnels ran out of them: fixed. A KNOWN GAP stays marked (it.fails): the credential works for every method and path of its host,
// so the sandbox can have the upstream mint a derived token it then holds.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllowEntry, type AllowRule } from "../../src/core/allow.js";
import type { EgressCredential } from "../../src/net/credential.js";
import { EgressProxy, type EgressLimits, type EgressRecord, type EgressSession } from "../../src/net/proxy.js";
import { HANDSHAKES_PER_SECOND } from "../../src/net/terminate.js";
import { connect, readAll, until } from "../support/egress-client.js";

const TOKEN = "npm_R3dT3amT0kenNeverLeaks46";
// A header credential whose value holds what URLs and JSON escape, and characters past ASCII.
const KEY = "k3y/pä+ss=wörd/46";
const IP = `127.217.${process.pid % 250}.1`;
const NAMES = ["registry.test", "keyed.test"];

const ranges: (string | undefined)[] = [];
const minted: string[] = [];
let cert = "";
const dirs: string[] = [];
let server: https.Server | undefined;

/** The upstream: every path echoes the credential it got, each in its own way. */
function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  const auth = req.headers.authorization ?? String(req.headers["x-api-key"] ?? "");
  const path = new URL(req.url ?? "/", "https://x").pathname;
  if (path === "/range-echo") {
    ranges.push(req.headers.range);
    const body = Buffer.from(`echo: ${auth} :end`);
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? "");
    if (!m) return void res.writeHead(200, { "content-length": body.length, "accept-ranges": "bytes" }).end(body);
    const part = body.subarray(Number(m[1]), Number(m[2]) + 1);
    return void res.writeHead(206, { "content-length": part.length }).end(part);
  }
  if (path === "/te-gzip") {
    res.setHeader("transfer-encoding", "gzip, chunked");
    return void res.writeHead(200).end(zlib.gzipSync(`echo: ${auth}`));
  }
  if (path === "/bomb") {
    const gz = zlib.gzipSync(Buffer.alloc(8 << 20));
    return void res.writeHead(200, { "content-encoding": "gzip", "content-length": gz.length }).end(gz);
  }
  if (path === "/enc-echo") return void res.writeHead(200, { "content-encoding": `x-${auth}` }).end("zz");
  if (path === "/reason") {
    res.writeEarlyHints({ link: `</${auth}>; rel=preload` });
    res.writeHead(401, `bad ${auth}`, { trailer: "x-t" });
    res.write("body");
    res.addTrailers({ "x-t": auth });
    return void res.end();
  }
  if (path === "/keyed-echo") {
    const json = JSON.stringify({ key: auth }).replaceAll("/", "\\/");
    return void res
      .writeHead(302, { location: `/login?key=${encodeURIComponent(auth)}` })
      .end(Buffer.concat([Buffer.from(`${json} raw=`), Buffer.from(auth, "latin1")]));
  }
  if (path === "/-/npm/v1/tokens" && req.method === "POST" && auth === `Bearer ${TOKEN}`) {
    minted.push("npm_MintedForTheSandbox0001");
    return void res.writeHead(201, { "content-type": "application/json" }).end(`{"token":"${minted.at(-1)}"}`);
  }
  res.writeHead(200, { "content-length": 2 }).end("ok");
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "pb-cred-rt-"));
  dirs.push(dir);
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-subj", "/CN=registry.test",
      "-addext", `subjectAltName=${NAMES.map((n) => `DNS:${n}`).join(",")}`], // prettier-ignore
    { stdio: "ignore" },
  );
  cert = readFileSync(join(dir, "cert.pem"), "utf8");
  server = https.createServer({ key: readFileSync(join(dir, "key.pem"), "utf8"), cert }, answer);
  await new Promise<void>((r, j) => server!.once("error", j).listen(443, IP, () => r()));
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ALLOW = NAMES.map((e) => parseAllowEntry(e) as AllowRule);
const bearer = (): EgressCredential => ({
  name: "npm-private",
  host: "registry.test",
  port: 443,
  header: "authorization",
  value: `Bearer ${TOKEN}`,
  secrets: [`Bearer ${TOKEN}`, TOKEN],
  ca: cert,
});
const keyed = (): EgressCredential => ({
  name: "api-key",
  host: "keyed.test",
  port: 443,
  header: "x-api-key",
  value: KEY,
  secrets: [KEY],
  ca: cert,
});

async function open(limits: Partial<EgressLimits> = {}): Promise<{ s: EgressSession; recs: EgressRecord[] }> {
  const p = new EgressProxy({
    limits,
    allowPrivate: [`${IP}/32`],
    resolve: async (h) => {
      if (NAMES.includes(h)) return [IP];
      throw Object.assign(new Error("no such host"), { code: "ENOTFOUND" });
    },
  });
  const recs: EgressRecord[] = [];
  const s = p.session(ALLOW, (r) => recs.push(r), [bearer(), keyed()]);
  dirs.push(s.dir);
  await s.listen();
  return { s, recs };
}

interface Reply {
  status?: number;
  reason?: string;
  headers?: http.IncomingHttpHeaders;
  trailers?: NodeJS.Dict<string>;
  informational: string[];
  body: Buffer;
  error?: string;
}

/** A TLS connection to `host` through a CONNECT, trusting the job CA. */
async function secure(s: EgressSession, host: string): Promise<tls.TLSSocket> {
  const t = await connect(s, `${host}:443`);
  if (!t.ok) throw new Error(`CONNECT refused: ${t.status} ${t.body}`);
  const ca = readFileSync(join(s.dir, s.caPath!), "utf8");
  const sock = tls.connect({ socket: t.socket, servername: host, ca });
  await new Promise<void>((r, j) => sock.once("secureConnect", () => r()).once("error", j));
  return sock;
}

/** One request through a terminated tunnel to `host`; everything that came back, the body as bytes. */
async function ask(
  s: EgressSession,
  host: string,
  path: string,
  headers: http.OutgoingHttpHeaders = {},
  method = "GET",
) {
  const sock = await secure(s, host);
  return new Promise<Reply>((resolve) => {
    const out: Reply = { informational: [], body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    const req = http.request({
      createConnection: () => sock,
      method,
      path,
      headers: { host, connection: "close", ...headers },
    });
    req.on("information", (i) => out.informational.push(JSON.stringify(i)));
    req.on("response", (res) => {
      Object.assign(out, { status: res.statusCode, reason: res.statusMessage, headers: res.headers });
      res.on("data", (c: Buffer) => chunks.push(c));
      const done = () => resolve({ ...out, trailers: res.trailers, body: Buffer.concat(chunks) });
      res.on("end", done);
      res.on("error", (e) => resolve({ ...out, body: Buffer.concat(chunks), error: e.message }));
      res.on("aborted", done);
    });
    req.on("error", (e) => resolve({ ...out, body: Buffer.concat(chunks), error: e.message }));
    req.end();
  });
}

/** Whether `text` holds the token, or a 12-character piece of it (a part of an echo), in any case. */
const holdsToken = (text: string) =>
  [...Array(TOKEN.length - 11).keys()].some((i) => text.toLowerCase().includes(TOKEN.slice(i, i + 12).toLowerCase()));

describe("an echoed secret cut into parts or coded past the scrub", () => {
  it("a Range request is not sent: the echo comes back whole, and starred", async () => {
    const { s } = await open();
    try {
      const before = ranges.length;
      const parts: string[] = [];
      for (const range of ["bytes=0-19", "bytes=20-33", "bytes=34-60"]) {
        const r = await ask(s, "registry.test", "/range-echo", { range, "if-range": "x" });
        expect(r.status).toBe(200);
        parts.push(r.body.toString("latin1"));
      }
      expect(ranges.slice(before)).toEqual([undefined, undefined, undefined]);
      expect(holdsToken(parts.join(""))).toBe(false);
      expect(parts[0]).toContain("*".repeat(TOKEN.length));
    } finally {
      await s.close();
    }
  });

  it("a transfer coding other than chunked is refused (502): its coded bytes cannot be scrubbed", async () => {
    const { s, recs } = await open();
    try {
      const r = await ask(s, "registry.test", "/te-gzip");
      expect(r.status).toBe(502);
      let decoded = "";
      try {
        decoded = zlib.gunzipSync(r.body).toString("latin1");
      } catch {
        /* not gzip: nothing coded came through */
      }
      expect(holdsToken(decoded + r.body.toString("latin1"))).toBe(false);
      await until(() => recs.length === 1);
      expect(recs[0]).toMatchObject({
        allowed: false,
        reason: expect.stringMatching(/^transfer-encoding gzip.+chunked cannot be scrubbed$/),
      });
    } finally {
      await s.close();
    }
  });

  it("a Content-Encoding naming the secret is recorded starred, and the client sees none of it", async () => {
    const { s, recs } = await open();
    try {
      const r = await ask(s, "registry.test", "/enc-echo");
      expect(r.status).toBe(502);
      await until(() => recs.length === 1);
      expect(recs[0]!.reason).toMatch(/^content-encoding x-\*+ cannot be scrubbed$/);
      expect(holdsToken(JSON.stringify(recs) + JSON.stringify(r) + r.body.toString())).toBe(false);
    } finally {
      await s.close();
    }
  });

  it("an echo percent-encoded (Location), JSON-escaped with \\/ and in the header's Latin-1 bytes is starred", async () => {
    const { s } = await open();
    try {
      const r = await ask(s, "keyed.test", "/keyed-echo");
      expect(r.status).toBe(302);
      const seen = `${r.headers!.location} ${r.body.toString("latin1")} ${r.body.toString("utf8")}`;
      for (const form of [KEY, encodeURIComponent(KEY), KEY.replaceAll("/", "\\/"), "pä+ss", "wörd", "p\u00c3\u00a4"])
        expect(seen).not.toContain(form);
      expect(r.headers!.location).toBe(`/login?key=${"*".repeat(encodeURIComponent(KEY).length)}`);
    } finally {
      await s.close();
    }
  });
});

describe("the job's byte budget holds what a terminated tunnel delivers", () => {
  it("a gzip bomb's decoded bytes are charged: 8 MiB from a few KiB stops at the budget", async () => {
    const { s, recs } = await open({ maxBytes: 256 << 10 });
    try {
      const r = await ask(s, "registry.test", "/bomb", { "accept-encoding": "gzip" });
      expect(r.body.length).toBeLessThan(512 << 10);
      await until(() => recs.length === 1);
      expect(recs[0]!.reason).toBe("byte limit for the job");
    } finally {
      await s.close();
    }
  });
});

describe("a request flood through one tunnel", () => {
  it("20,000 pipelined requests in one write end the tunnel at 8 in flight: a few reach the upstream, 2 records", async () => {
    const { s, recs } = await open();
    try {
      const sock = await secure(s, "registry.test");
      const got = readAll(sock);
      const before = ranges.length;
      sock.write("GET /range-echo HTTP/1.1\r\nHost: registry.test\r\n\r\n".repeat(20_000));
      await got;
      await until(() => recs.some((r) => /more than 8 requests in flight/.test(r.reason ?? "")));
      await new Promise((r) => setTimeout(r, 300));
      expect(ranges.length - before).toBeLessThanOrEqual(8);
      expect(recs.length).toBeLessThanOrEqual(10);
    } finally {
      await s.close();
    }
  });

  it("a request's head is charged to the job's byte budget: big heads alone spend it (429, nothing sent)", async () => {
    const { s, recs } = await open({ maxBytes: 2000 });
    try {
      const before = ranges.length;
      const pad = { "x-pad": "p".repeat(1200) };
      expect((await ask(s, "registry.test", "/range-echo", pad)).status).toBe(200);
      expect((await ask(s, "registry.test", "/range-echo", pad)).status).toBe(429);
      expect(ranges.length - before).toBe(1);
      await until(() => recs.length === 2);
      expect(recs[1]).toMatchObject({ allowed: false, status: 429, reason: "byte limit for the job" });
    } finally {
      await s.close();
    }
  });
});

describe("a tunnel's connection slot", () => {
  it("is freed when the client goes: 6 tunnels one after another fit a limit of 2 connections", async () => {
    const { s, recs } = await open({ maxConnections: 2 });
    try {
      for (let i = 0; i < 6; i++) {
        const sock = await secure(s, "registry.test");
        sock.destroy();
        await until(() => s.openSockets === 0);
      }
      expect(recs.filter((r) => /connections at once/.test(r.reason ?? ""))).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

describe("the worker's CPU", () => {
  it("terminated handshakes are paced (HANDSHAKES_PER_SECOND): 30 at once do not all complete at once", async () => {
    const { s } = await open();
    try {
      const done: number[] = [];
      const socks = await Promise.all(
        Array.from({ length: 30 }, () => secure(s, "registry.test").then((x) => (done.push(performance.now()), x))),
      );
      for (const x of socks) x.destroy();
      // 30 starts 1/HANDSHAKES_PER_SECOND apart span 580 ms; the first's own handshake (its leaf
      // made) ends later than its start, so the ends are measured against 20 intervals, not 29.
      // Unpaced, the 30 end within tens of milliseconds.
      expect(Math.max(...done) - Math.min(...done)).toBeGreaterThanOrEqual((20 * 1000) / HANDSHAKES_PER_SECOND);
    } finally {
      await s.close();
    }
  });
});

describe("held: the credential's host under other spellings", () => {
  it("a CONNECT and SNI in another case with a trailing dot are the same host; a Host with another port is a 421", async () => {
    const { s, recs } = await open();
    try {
      const t = await connect(s, "REGISTRY.Test.:443");
      if (!t.ok) throw new Error(`CONNECT refused: ${t.status}`);
      const ca = readFileSync(join(s.dir, s.caPath!), "utf8");
      const sock = tls.connect({ socket: t.socket, servername: "registry.test", ca });
      await new Promise<void>((r, j) => sock.once("secureConnect", () => r()).once("error", j));
      const got = readAll(sock);
      sock.write("GET /a HTTP/1.1\r\nHost: REGISTRY.TEST.\r\n\r\nGET /b HTTP/1.1\r\nHost: registry.test:8443\r\n\r\n");
      const out = await got;
      expect(out).toMatch(/^HTTP\/1\.1 200 OK[^]*\r\n\r\nokHTTP\/1\.1 421 /);
      expect(holdsToken(out)).toBe(false);
      await until(() => recs.length >= 2);
      const seen = recs.map((r) => [r.host, r.path, r.status]);
      expect(seen.sort((a, b) => String(a[1]).localeCompare(String(b[1])))).toEqual([
        ["registry.test", "/a", 200],
        ["registry.test", "/b", 421],
      ]);
    } finally {
      await s.close();
    }
  });
});

describe("held: what the proxy makes itself or never relays", () => {
  it("the upstream's reason phrase, its trailers and a 103 carrying the secret never reach the client", async () => {
    const { s, recs } = await open();
    try {
      const r = await ask(s, "registry.test", "/reason");
      expect(r.status).toBe(401);
      expect(r.reason).toBe("Unauthorized");
      expect(r.informational).toEqual([]);
      expect(r.trailers).toEqual({});
      expect(r.body.toString()).toBe("body");
      await until(() => recs.length === 1);
      expect(holdsToken(JSON.stringify(r) + JSON.stringify(recs))).toBe(false);
    } finally {
      await s.close();
    }
  });

  it.each([
    ["CL+TE", "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
    ["two lengths", "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"],
    ["obs-fold", "X-A: a\r\n b\r\nContent-Length: 0\r\n\r\n"],
  ])("smuggled framing inside the tunnel (%s) is a 400; nothing reaches the upstream", async (_name, rest) => {
    const { s, recs } = await open();
    try {
      const sock = await secure(s, "registry.test");
      const got = readAll(sock);
      const before = ranges.length;
      sock.write(
        `POST /range-echo HTTP/1.1\r\nHost: registry.test\r\n${rest}GET /range-echo HTTP/1.1\r\nHost: registry.test\r\n\r\n`,
      );
      expect(await got).toMatch(/^HTTP\/1\.1 400 /);
      expect(ranges.length).toBe(before);
      expect(recs.every((x) => !x.allowed)).toBe(true);
    } finally {
      await s.close();
    }
  });
});

describe("what the credential can do, beyond being read", () => {
  // The proxy adds the header to every request the sandbox sends to the credential's host, whatever
  // its method and path: a registry's token endpoint mints a new token for the sandbox (npm token
  // create, a Docker registry's /token, a login that answers with a session cookie), which the
  // scrub cannot know, and a write-capable token publishes or deletes. Closing it needs the
  // operator to say per credential which methods and paths it is for (GET and HEAD, plus git's
  // POST .../git-upload-pack), a field of the credentials file; not done here.
  it.fails("KNOWN GAP: the sandbox cannot have the upstream mint a derived token with the credential", async () => {
    const { s } = await open();
    try {
      const before = minted.length;
      const r = await ask(s, "registry.test", "/-/npm/v1/tokens", { "content-type": "application/json" }, "POST");
      expect(minted.length - before).toBe(0);
      expect(r.body.toString()).not.toContain("npm_MintedForTheSandbox");
    } finally {
      await s.close();
    }
  });
});
