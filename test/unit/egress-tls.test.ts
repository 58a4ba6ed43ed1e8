// The setup proxy reaches the names it allows, not just their addresses (issue 23, point 4),
// through the real proxy on its Unix socket and a real HTTPS host on a loopback address of this
// test's own, whose one certificate covers several names (as one CDN address serves many sites).
// secure.test is on the allow-list; shared.test resolves to the same address and is not. A
// CONNECT to secure.test whose TLS names shared.test, or no name, must not reach the server; a
// CONNECT to port 80 is refused; a second ClientHello after a HelloRetryRequest is checked too.
// Also: every field of the egress records is bounded, and the egress base directory must be the
// worker's own.
import { chownSync, chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllowEntry, type AllowRule } from "../../src/core/allow.js";
import { EgressProxy, type EgressLimits, type EgressRecord, type EgressSession } from "../../src/net/proxy.js";
import { captureHello, connect, fragmenting, readAll, tlsRequest, until } from "../support/egress-client.js";
import { startTlsHost, type TlsHost } from "../support/tls-host.js";

let host: TlsHost;
const dirs: string[] = [];
beforeAll(async () => {
  host = await startTlsHost(1, ["secure.test", "shared.test", "alt.test", "retry.test"]);
});
afterAll(async () => {
  await host?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ALLOW = ["secure.test", "alt.test:8443", "retry.test:9443"].map((e) => parseAllowEntry(e) as AllowRule);

function proxy(limits: Partial<EgressLimits> = {}) {
  return new EgressProxy({
    limits,
    allowPrivate: [`${host.ip}/32`],
    resolve: async (h) => {
      if (["secure.test", "shared.test", "alt.test", "retry.test"].includes(h)) return [host.ip];
      throw Object.assign(new Error("no such host"), { code: "ENOTFOUND" });
    },
  });
}

async function open(p = proxy()): Promise<{ s: EgressSession; recs: EgressRecord[] }> {
  const recs: EgressRecord[] = [];
  const s = p.session(ALLOW, (r) => recs.push(r));
  await s.listen();
  return { s, recs };
}

const HANDSHAKE_CUT =
  /disconnected before secure TLS connection|ECONNRESET|socket hang up|EPIPE|closed before the TLS handshake ended/;
const conns = (port: number) => host.connections[port]!;

describe("CONNECT reaches the name it allows", () => {
  it("a TLS client naming the CONNECT host reaches it on 443 (the name's case and a trailing dot aside), recorded with bytes", async () => {
    const { s, recs } = await open();
    try {
      const ok = await tlsRequest(s, "secure.test:443", "secure.test", { ca: host.ca });
      expect(ok.error).toBeUndefined();
      expect(ok.response).toMatch(/^HTTP\/1\.1 200 [^]*tls 443 sni=secure\.test host=secure\.test$/);
      const upper = await tlsRequest(s, "Secure.Test.:443", "SECURE.test", {
        ca: host.ca,
        tls: { checkServerIdentity: () => undefined },
      });
      expect(upper.response).toMatch(/tls 443 sni=SECURE\.test/);
      await until(() => recs.length === 2);
      expect(recs[0]).toMatchObject({
        host: "secure.test",
        port: 443,
        method: "CONNECT",
        allowed: true,
        address: host.ip,
      });
      expect(recs[0]!.reason).toBeUndefined();
      expect(recs[0]!.bytesUp).toBeGreaterThan(200);
      expect(recs[0]!.bytesDown).toBeGreaterThan(200);
      expect(recs[1]).toMatchObject({ host: "secure.test", allowed: true });
    } finally {
      await s.close();
    }
  });

  it("the CONNECT with another server name is refused: nothing reaches the server, and the refusal is recorded", async () => {
    const { s, recs } = await open();
    try {
      const before = conns(443);
      // shared.test is on the same address and in the server's certificate: without the check this
      // handshake succeeds and the request is served as shared.test.
      const r = await tlsRequest(s, "secure.test:443", "shared.test", { ca: host.ca });
      expect(r.response).toBeUndefined();
      expect(r.error).toMatch(HANDSHAKE_CUT);
      await until(() => recs.length === 1);
      expect(recs[0]).toMatchObject({
        host: "secure.test",
        port: 443,
        method: "CONNECT",
        allowed: false,
        bytesUp: 0,
        bytesDown: 0,
        reason: "the ClientHello's server name shared.test is not the CONNECT host secure.test",
      });
      expect(conns(443)).toBe(before);
      expect(host.names).not.toContain("shared.test");
      expect([...s.refusals]).toEqual([
        "secure.test:443 (the ClientHello's server name shared.test is not the CONNECT host secure.test)",
      ]);
    } finally {
      await s.close();
    }
  });

  it("a ClientHello with no server name (SNI) is refused", async () => {
    const { s, recs } = await open();
    try {
      const before = conns(443);
      // The server has one certificate and needs no SNI: without the check this succeeds.
      const r = await tlsRequest(s, "secure.test:443", "", {
        ca: host.ca,
        hostHeader: "shared.test",
        tls: { checkServerIdentity: () => undefined },
      });
      expect(r.response).toBeUndefined();
      expect(r.error).toMatch(HANDSHAKE_CUT);
      await until(() => recs.length === 1);
      expect(recs[0]).toMatchObject({
        host: "secure.test",
        allowed: false,
        reason: "the ClientHello names no server (no SNI); it must name secure.test",
      });
      expect(conns(443)).toBe(before);
    } finally {
      await s.close();
    }
  });

  it("CONNECT to port 80 is refused (443, or a port an entry names, only)", async () => {
    const { s, recs } = await open();
    try {
      const r80 = await connect(s, "secure.test:80");
      expect(r80.ok).toBe(false);
      expect(r80).toMatchObject({
        status: 403,
        body: expect.stringContaining(
          "secure.test:80 refused: port 80: CONNECT only to port 443 or a port an allow-list entry names (host:port); secure.test allows 443",
        ),
      });
      // a port another name's entry names does not open it for this name
      expect((await connect(s, "secure.test:8443")).ok).toBe(false);
      // the entry alt.test:8443 opens 8443 (and not 443) for alt.test
      expect((await tlsRequest(s, "alt.test:8443", "alt.test", { ca: host.ca })).response).toMatch(
        /tls 8443 sni=alt\.test host=alt\.test$/,
      );
      expect((await connect(s, "alt.test:443")).ok).toBe(false);
      await until(() => recs.length === 4);
      expect(recs.map((r) => [r.port, r.allowed, r.reason?.replace(/;.*/, "") ?? null])).toEqual([
        [80, false, "port 80: CONNECT only to port 443 or a port an allow-list entry names (host:port)"],
        [8443, false, "port 8443: CONNECT only to port 443 or a port an allow-list entry names (host:port)"],
        [8443, true, null],
        [443, false, "port 443: CONNECT only to port 443 or a port an allow-list entry names (host:port)"],
      ]);
    } finally {
      await s.close();
    }
  });

  it("plain HTTP, an oversized or malformed hello, and a client that sends nothing are refused inside the tunnel, before any upstream connection", async () => {
    const { s, recs } = await open(proxy({ helloMs: 500 }));
    try {
      const before = conns(443);
      const send = async (bytes: Buffer | string) => {
        const t = await connect(s, "secure.test:443");
        if (!t.ok) throw new Error("CONNECT refused");
        const out = readAll(t.socket);
        if (bytes.length) t.socket.write(bytes);
        return out;
      };
      expect(await send("GET / HTTP/1.1\r\nHost: shared.test\r\n\r\n")).toBe("");
      expect(await send(Buffer.from([0x16, 3, 1, 0xff, 0xff]))).toBe("");
      expect(await send(Buffer.from([0x16, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff]))).toBe("");
      expect(await send(Buffer.from([0x16, 3, 1, 0, 10, 1]))).toBe(""); // a part, then nothing
      expect(await send("")).toBe("");
      await until(() => recs.length === 5);
      expect(recs.map((r) => [r.allowed, r.reason])).toEqual([
        [false, 'not a TLS handshake (first byte 0x47: "G", plain text)'],
        [false, "a record of 65535 bytes (over 2^14)"],
        [false, "a ClientHello of 16777215 bytes (over 16384)"],
        [false, "no complete TLS ClientHello within 500 ms"],
        [false, "no complete TLS ClientHello within 500 ms"],
      ]);
      expect(conns(443)).toBe(before);
    } finally {
      await s.close();
    }
  });

  it("a ClientHello sent in the same write as the CONNECT is checked the same way", async () => {
    const { s, recs } = await open();
    try {
      const before = conns(443);
      const send = (hello: Buffer) =>
        new Promise<Buffer>((resolve) => {
          const c = net.connect(s.socketPath);
          const got: Buffer[] = [];
          c.on("data", (d: Buffer) => {
            got.push(d);
            // the 200, then the server's first flight (ServerHello…): enough to know it was reached
            if (Buffer.concat(got).length > 200) c.destroy();
          });
          c.on("close", () => resolve(Buffer.concat(got)));
          c.write(
            Buffer.concat([Buffer.from("CONNECT secure.test:443 HTTP/1.1\r\nHost: secure.test:443\r\n\r\n"), hello]),
          );
        });
      const evil = await send(await captureHello({ servername: "shared.test" }));
      expect(evil.toString("latin1")).toBe("HTTP/1.1 200 Connection Established\r\n\r\n");
      expect(conns(443)).toBe(before);
      const good = await send(await captureHello({ servername: "secure.test" }));
      expect(good.length).toBeGreaterThan(200);
      expect(good[39]).toBe(0x16); // a TLS handshake record right after the 200
      await until(() => recs.length === 2);
      expect(recs[0]).toMatchObject({
        allowed: false,
        reason: "the ClientHello's server name shared.test is not the CONNECT host secure.test",
      });
      expect(recs[1]).toMatchObject({ allowed: true });
      expect(conns(443)).toBe(before + 1);
    } finally {
      await s.close();
    }
  });

  it("a ClientHello arriving in pieces (many small records, each written in two parts) is read and forwarded unchanged", async () => {
    const { s, recs } = await open();
    try {
      for (const size of [1, 40, 300]) {
        const r = await tlsRequest(s, "secure.test:443", "secure.test", {
          ca: host.ca,
          wrap: (sock) => fragmenting(sock, size),
        });
        expect([size, r.error ?? null]).toEqual([size, null]);
        expect(r.response).toMatch(/tls 443 sni=secure\.test host=secure\.test$/);
      }
      await until(() => recs.length === 3);
      expect(recs.every((r) => r.allowed)).toBe(true);
    } finally {
      await s.close();
    }
  });

  it("after a HelloRetryRequest the second ClientHello is checked: the same name passes, another is refused", async () => {
    const { s, recs } = await open();
    try {
      // The server on 9443 takes P-256 only; node's client sends an X25519 key share first, so
      // the server asks again and the client's second ClientHello goes through the gate too.
      const ok = await tlsRequest(s, "retry.test:9443", "retry.test", {
        ca: host.ca,
        tls: { ecdhCurve: "X25519:P-256" },
      });
      expect(ok.error).toBeUndefined();
      expect(ok.response).toMatch(/tls 9443 sni=retry\.test/);

      // A first ClientHello naming retry.test, and right behind it a second naming shared.test.
      const first = await captureHello({ servername: "retry.test", ecdhCurve: "X25519:P-256" });
      const second = await captureHello({ servername: "shared.test", ecdhCurve: "P-256" });
      const t = await connect(s, "retry.test:9443");
      if (!t.ok) throw new Error("CONNECT refused");
      const got: Buffer[] = [];
      t.socket.on("data", (c: Buffer) => got.push(c));
      const closed = new Promise((r) => t.socket.on("close", r));
      t.socket.write(Buffer.concat([first, second]));
      await closed;
      const answer = Buffer.concat(got);
      // the server's HelloRetryRequest reached the client; the second hello did not reach the server
      expect(answer.subarray(11, 43).toString("hex")).toBe(
        "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c",
      );
      await until(() => recs.length === 2);
      expect(recs[0]).toMatchObject({ host: "retry.test", allowed: true });
      expect(recs[1]).toMatchObject({
        host: "retry.test",
        allowed: false,
        bytesUp: first.length,
        reason:
          "second ClientHello (after a HelloRetryRequest): the ClientHello's server name shared.test is not the CONNECT host retry.test",
      });
      expect(host.names).not.toContain("shared.test");
    } finally {
      await s.close();
    }
  });
});

describe("egress records are bounded at the source", () => {
  it("raw CONNECT targets and hosts of up to 16 KiB, long methods and control bytes are cut and cleaned", async () => {
    const { s, recs } = await open();
    try {
      const raw = (line: string) =>
        new Promise<string>((resolve) => {
          const c = net.connect(s.socketPath);
          let out = "";
          c.on("data", (d) => (out += d.toString()));
          c.on("close", () => resolve(out));
          c.on("error", () => resolve(out));
          c.write(line);
        });
      const long = "x".repeat(15_000);
      expect(await raw(`CONNECT ${long}:443 HTTP/1.1\r\n\r\n`)).toMatch(
        /^HTTP\/1\.1 403[^]*refused: not a valid host name\n$/,
      );
      expect(await raw(`CONNECT ${long} HTTP/1.1\r\n\r\n`)).toMatch(/refused: CONNECT needs host:port\n$/);
      expect(await raw(`GET /x HTTP/1.1\r\nHost: ${"h".repeat(15_000)}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 400/);
      expect(await raw(`${"M".repeat(300)} http://secure.test/ HTTP/1.1\r\nHost: secure.test\r\n\r\n`)).toMatch(
        /^HTTP\/1\.1 40\d/,
      );
      await until(() => recs.length === 4);
      for (const r of recs) {
        expect(Buffer.byteLength(r.host)).toBeLessThanOrEqual(253);
        expect(r.method.length).toBeLessThanOrEqual(24);
        expect(r.reason!.length).toBeLessThanOrEqual(400);
        expect(JSON.stringify(r)).toMatch(/^[\x20-\x7e]*$/);
      }
      expect(recs[0]).toMatchObject({
        host: `${"x".repeat(250)}...`,
        port: 443,
        method: "CONNECT",
        reason: "not a valid host name",
      });
      expect(recs[1]).toMatchObject({ host: `${"x".repeat(250)}...`, reason: "CONNECT needs host:port" });
      expect(recs[2]!.host).toBe(`${"h".repeat(250)}...`);
    } finally {
      await s.close();
    }
  });
});

describe("the egress base directory (PATCHBAY_EGRESS_DIR, default $TMPDIR/patchbay-egress)", () => {
  const parent = () => {
    const d = mkdtempSync(join(tmpdir(), "pb-egress-base-"));
    dirs.push(d);
    return d;
  };
  const session = (baseDir?: string) => new EgressProxy(baseDir ? { baseDir } : {}).session([]);
  const mode = (p: string) => statSync(p).mode & 0o7777;

  it("is made with mode 0700; the worker's own directory readable by others (0755, 0711) is tightened to 0700", async () => {
    const p = parent();
    const made = join(p, "a", "egress");
    const s = session(made);
    expect(mode(made)).toBe(0o700);
    expect(statSync(made).uid).toBe(process.getuid!());
    await s.close();
    for (const m of [0o755, 0o711]) {
      const d = join(p, `m${m.toString(8)}`);
      mkdirSync(d);
      chmodSync(d, m);
      await session(d).close();
      expect(mode(d)).toBe(0o700);
    }
  });

  it("is refused, naming the fix, when another user's, writable by group or others, a symlink or a file", () => {
    const p = parent();
    const other = join(p, "other");
    mkdirSync(other, { mode: 0o700 });
    chownSync(other, 65534, 65534);
    expect(() => session(other)).toThrow(
      `the egress directory ${other} is owned by uid 65534, not the worker's (0); remove it (rm -r ${other}) or set PATCHBAY_EGRESS_DIR to a directory of the worker's own with mode 0700`,
    );
    for (const m of [0o777, 0o1777, 0o720, 0o702]) {
      const d = join(p, `w${m.toString(8)}`);
      mkdirSync(d);
      chmodSync(d, m);
      expect(() => session(d)).toThrow(
        `the egress directory ${d} has mode 0${m.toString(8)} (writable by group or others)`,
      );
      expect(mode(d)).toBe(m); // left as it was
    }
    const mine = join(p, "mine");
    mkdirSync(mine, { mode: 0o700 });
    const link = join(p, "link");
    symlinkSync(mine, link);
    expect(() => session(link)).toThrow(`the egress directory ${link} is a symlink`);
    const dangling = join(p, "dangling");
    symlinkSync(join(p, "nowhere"), dangling);
    expect(() => session(dangling)).toThrow(`the egress directory ${dangling} is a symlink`);
    const file = join(p, "file");
    writeFileSync(file, "");
    expect(() => session(file)).toThrow(`the egress directory ${file} is not a directory`);
  });

  it("the default, $TMPDIR/patchbay-egress, made by another user before the worker, is refused", () => {
    const p = parent();
    const planted = join(p, "patchbay-egress");
    mkdirSync(planted, { mode: 0o700 });
    chownSync(planted, 65534, 65534);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = p;
    try {
      expect(() => new EgressProxy().session([])).toThrow(`the egress directory ${planted} is owned by uid 65534`);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });
});
