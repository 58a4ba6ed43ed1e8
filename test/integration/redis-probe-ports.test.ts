// A Redis URL naming a port where Redis is not (src/redis/probe.ts, src/redis/port-speaks.ts): the
// error says what answered there, against real listeners on loopback: an HTTP server, an HTTPS
// server, a TLS server that says nothing, a port that accepts and says nothing, one that closes at
// once, another protocol, and a closed port. Never ioredis' "Unknown RESP type … Please report this.".
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as httpServer } from "node:http";
import { createServer as httpsServer } from "node:https";
import { createServer as tcpServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as tlsServer } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeRedisTarget, RedisConnectError } from "../../src/redis/probe.js";

const servers: Server[] = [];
const ports: Record<string, number> = {};
let dir: string;

async function listen(name: string, s: Server): Promise<void> {
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  ports[name] = (s.address() as AddressInfo).port;
}

/** The probe's error for `scheme://127.0.0.1:port`: its kind and its reason. */
async function why(scheme: "redis" | "rediss", port: number): Promise<{ kind: string; why: string }> {
  try {
    (await probeRedisTarget(`${scheme}://127.0.0.1:${port}`, {}, 1000)).conn.disconnect();
  } catch (err) {
    expect(err).toBeInstanceOf(RedisConnectError);
    const e = err as RedisConnectError;
    expect(e.message).not.toMatch(/Unknown RESP type|Please report this/);
    return { kind: e.kind, why: e.why };
  }
  throw new Error(`${scheme}://…:${port} was taken for Redis`);
}

describe("what answers on a port that is not Redis", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "pb-probe-"));
    execFileSync(
      "openssl",
      [
        ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost"],
        ...["-keyout", "key.pem", "-out", "cert.pem", "-days", "1"],
      ],
      { cwd: dir, stdio: "ignore", timeout: 30_000 },
    );
    const tls = { key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) };
    await listen(
      "http",
      httpServer((_q, r) => r.end("hello")),
    );
    await listen(
      "https",
      httpsServer(tls, (_q, r) => r.end("hello")),
    );
    await listen(
      "tlsQuiet",
      tlsServer(tls, () => {}),
    );
    await listen(
      "quiet",
      tcpServer(() => {}),
    );
    await listen(
      "closes",
      tcpServer((s) => s.end()),
    );
    await listen(
      "ssh",
      tcpServer((s) => s.write("SSH-2.0-OpenSSH_9.2\r\n")),
    );
    await listen(
      "hostile",
      tcpServer((s) => s.write("-ERR \x1b]0;PWNED\x07\x1b[31mRED \u202eevil\r\n")),
    );
    const closed = tcpServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    ports.closed = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
  }, 60_000);

  afterAll(() => {
    for (const s of servers) s.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("an HTTP server, by redis:// and by rediss://", async () => {
    for (const scheme of ["redis", "rediss"] as const)
      expect(await why(scheme, ports.http!)).toEqual({
        kind: "config",
        why: "an HTTP server answers on this port, not Redis: check the host and port (Redis listens on 6379 by default)",
      });
  });

  it("an HTTPS server by redis:// is named as such, not just as TLS", async () => {
    expect(await why("redis", ports.https!)).toEqual({
      kind: "config",
      why: "an HTTPS server answers on this port, not Redis: check the host and port (Redis listens on 6379 by default)",
    });
  });

  it("a TLS server that answers no PING: TLS, with rediss:// as a maybe", async () => {
    const r = await why("redis", ports.tlsQuiet!);
    expect(r.kind).toBe("config");
    expect(r.why).toMatch(/^this port speaks TLS: use rediss:\/\/ if it is Redis over TLS \(nothing answered/);
  });

  it("a port that accepts and says nothing, one that closes at once, another protocol", async () => {
    expect((await why("redis", ports.quiet!)).why).toMatch(
      /^something accepted the connection and answered nothing to a Redis PING within \d+ ms/,
    );
    expect((await why("redis", ports.closes!)).why).toMatch(
      /^something accepted the connection and closed it without a word/,
    );
    expect((await why("redis", ports.ssh!)).why).toMatch(
      /^something that is not Redis answers on this port \(it said "SSH-2\.0-OpenSSH_9\.2"\)/,
    );
  });

  it("a closed port: the connection refused, as an outage", async () => {
    expect(await why("redis", ports.closed!)).toEqual({
      kind: "infra",
      why: expect.stringMatching(/ECONNREFUSED/),
    });
  });

  it("a port whose answer looks like a Redis error: what it said is quoted as safe text", async () => {
    try {
      (await probeRedisTarget(`redis://127.0.0.1:${ports.hostile!}`, {}, 1000)).conn.disconnect();
      throw new Error("taken for Redis");
    } catch (err) {
      const e = err as RedisConnectError;
      expect(e).toBeInstanceOf(RedisConnectError);
      for (const text of [e.message, e.why]) {
        expect(text).not.toMatch(/[\x1b\x07\u202e]/);
        expect(text).toContain("RED");
      }
    }
  });
});
