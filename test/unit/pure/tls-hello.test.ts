// Pure parts of the CONNECT tunnel's TLS check: the ClientHello reader (records, fragmentation,
// caps), the ClientHello parser (server_name, ECH, every length), the HelloRetryRequest test of the
// server's first bytes, the gate that decides what goes upstream, and the bounds on egress records.
// Real ClientHellos come from node:tls writing into an in-memory stream (no network); malformed
// ones are built byte by byte.
import tls from "node:tls";
import { describe, expect, it } from "vitest";
import { isAllowed, parseAllowEntry, refusal, type AllowRule } from "../../../src/core/allow.js";
import {
  ClientHelloReader,
  MAX_HELLO,
  parseClientHello,
  serverAnswer,
  type Read,
} from "../../../src/net/client-hello.js";
import { bounded, boundRecord, RECORD_BOUNDS } from "../../../src/net/record.js";
import { HELLO_STREAM, TlsGate } from "../../../src/net/tls-gate.js";
import { captureHello } from "../../support/egress-client.js";

// ---- building TLS bytes ----
const u16 = (n: number) => [(n >> 8) & 255, n & 255];
const vec8 = (b: number[]) => [b.length, ...b];
const vec16 = (b: number[]) => [...u16(b.length), ...b];
const ext = (type: number, data: number[]) => [...u16(type), ...vec16(data)];
const ascii = (s: string) => [...Buffer.from(s, "latin1")];
const sni = (name: string, type = 0) => ext(0, vec16([type, ...vec16(ascii(name))]));
const ALPN = ext(16, vec16(vec8(ascii("http/1.1"))));
const GROUPS = ext(10, vec16([0x00, 0x1d, 0x00, 0x17]));

interface HelloParts {
  exts?: number[][];
  version?: number;
  session?: number;
  suites?: number[];
  comp?: number[];
  noExtensions?: boolean;
  trailing?: number[];
}
function body({
  exts = [GROUPS, sni("allowed.test"), ALPN],
  version = 0x0303,
  session = 32,
  suites = [0x13, 0x01, 0x13, 0x02],
  comp = [0],
  noExtensions,
  trailing = [],
}: HelloParts = {}): number[] {
  return [
    ...u16(version),
    ...Array<number>(32).fill(7),
    ...vec8(Array<number>(session).fill(1)),
    ...vec16(suites),
    ...vec8(comp),
    ...(noExtensions ? [] : vec16(exts.flat())),
    ...trailing,
  ];
}
const pbody = (parts: HelloParts = {}) => Uint8Array.from(body(parts));
const handshake = (b: number[], type = 1) => [
  type,
  (b.length >> 16) & 255,
  (b.length >> 8) & 255,
  b.length & 255,
  ...b,
];
/** The handshake bytes in records of at most `size` bytes each. */
function records(hs: number[], size = 16_384, type = 0x16): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < hs.length; i += size) {
    const f = hs.slice(i, i + size);
    out.push(type, 3, 1, ...u16(f.length), ...f);
  }
  return Uint8Array.from(out);
}
const hello = (parts: HelloParts = {}, size?: number) => records(handshake(body(parts)), size);
const cat = (...parts: Uint8Array[]) => Uint8Array.from(parts.flatMap((p) => [...p]));

const realHello = async (opts: tls.ConnectionOptions) => Uint8Array.from(await captureHello(opts));

/** Reads a stream delivered in `chunk`-byte pieces the way the gate does: advance once `need` bytes are here. */
function readIn(stream: Uint8Array, chunk: number, maxStream = HELLO_STREAM): Read {
  const reader = new ClientHelloReader({ maxStream });
  let need = 0;
  let r: Read = { kind: "more", need: 0 };
  for (let have = Math.min(chunk, stream.length); ; have = Math.min(have + chunk, stream.length)) {
    if (have >= need) {
      r = reader.advance(stream.subarray(0, have));
      if (r.kind !== "more") return r;
      need = r.need;
    }
    if (have === stream.length) return r;
  }
}
const parsed = (r: Read) => (r.kind === "message" ? parseClientHello(r.body) : r);

describe("ClientHello reader: records and fragmentation", () => {
  it("reads node's real ClientHello whole, in 1-byte pieces, and re-fragmented into many records", async () => {
    const real = await realHello({ servername: "allowed.test" });
    expect(real[0]).toBe(0x16);
    for (const chunk of [real.length, 1, 7, 100]) {
      const r = readIn(real, chunk);
      expect([chunk, r.kind]).toEqual([chunk, "message"]);
      expect((r as { end: number }).end).toBe(real.length);
      expect(parsed(r)).toMatchObject({ serverName: "allowed.test", ech: false });
    }
    const hs = [...real.subarray(5)];
    for (const size of [1, 3, 64, 500]) {
      const refrag = records(hs, size);
      const r = readIn(refrag, 13);
      expect([size, r.kind]).toEqual([size, size === 1 && refrag.length > HELLO_STREAM ? "bad" : "message"]);
      if (r.kind === "message") {
        expect(r.end).toBe(refrag.length);
        expect(parseClientHello(r.body)).toMatchObject({ serverName: "allowed.test" });
      }
    }
  });

  it("a hello of several records, with bytes after its last record: `end` is where the hello's records end", () => {
    const h = hello({}, 20);
    const after = Uint8Array.from([0x17, 3, 3, 0, 2, 9, 9]);
    const r = readIn(cat(h, after), 5);
    expect(r).toMatchObject({ kind: "message", end: h.length });
  });

  it("asks for exactly the bytes it needs: the next header, then the whole record", () => {
    const h = hello();
    const reader = new ClientHelloReader({ maxStream: HELLO_STREAM });
    expect(reader.advance(h.subarray(0, 3))).toEqual({ kind: "more", need: 5 });
    expect(reader.advance(h.subarray(0, 5))).toEqual({ kind: "more", need: h.length });
    expect(reader.advance(h).kind).toBe("message");
  });

  it("refuses what is not TLS, wrong record types and versions, empty and oversized records, at once", () => {
    const bad = (stream: Uint8Array) => {
      const r = new ClientHelloReader({ maxStream: HELLO_STREAM }).advance(stream);
      return r.kind === "bad" ? r.reason : r.kind;
    };
    expect(bad(Uint8Array.from(Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")))).toBe(
      'not a TLS handshake (first byte 0x47: "G", plain text)',
    );
    expect(bad(Uint8Array.from([0x80, 0x2e, 0x01, 0x00, 0x02]))).toBe("not a TLS handshake (first byte 0x80)"); // SSLv2-style hello
    expect(bad(Uint8Array.from([0x15, 3, 3, 0, 2, 2, 40]))).toMatch(/^not a TLS handshake/);
    expect(bad(Uint8Array.from([0x16, 2, 0, 0, 4]))).toMatch(/^not a TLS handshake/);
    expect(bad(Uint8Array.from([0x16, 3, 9, 0, 4]))).toMatch(/^not a TLS handshake/);
    expect(bad(Uint8Array.from([0x16, 3, 1, 0, 0]))).toBe("an empty handshake record");
    // a huge record length is refused from its header, without waiting for its bytes
    expect(bad(Uint8Array.from([0x16, 3, 1, 0xff, 0xff]))).toBe("a record of 65535 bytes (over 2^14)");
    expect(bad(Uint8Array.from([0x16, 3, 1, 0x40, 0x01]))).toBe("a record of 16385 bytes (over 2^14)");
    // a huge handshake length, from its first record
    expect(bad(Uint8Array.from([0x16, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff]))).toBe(
      `a ClientHello of 16777215 bytes (over ${MAX_HELLO})`,
    );
    expect(bad(Uint8Array.from([0x16, 3, 1, 0, 4, 2, 0, 0, 40]))).toBe(
      "handshake message type 2 where a ClientHello (1) was expected",
    );
    // after a first handshake record, an alert or application data cannot come before the hello ends
    const h = hello({}, 30);
    expect(bad(cat(h.subarray(0, 35), Uint8Array.from([0x17, 3, 3, 0, 1, 0])))).toBe(
      "record type application_data where the ClientHello was expected",
    );
  });

  it("caps the hello (declared or grown over records) and the stream it may take", () => {
    const big = handshake(body({ exts: [sni("allowed.test"), ext(21, Array<number>(MAX_HELLO).fill(0))] }));
    const r = readIn(records(big), 1000);
    expect(r).toEqual({ kind: "bad", reason: `a ClientHello of ${big.length - 4} bytes (over ${MAX_HELLO})` });
    // a handshake header that says less, then more records than it: refused as they arrive
    const lying = [1, 0, 0, 60, ...Array<number>(MAX_HELLO + 10).fill(0)];
    expect(readIn(records(lying, 4000), 4000)).toEqual({
      kind: "bad",
      reason: "bytes after the ClientHello in its record",
    });
    // 1-byte records: six stream bytes per hello byte, over the stream cap
    const frag = records(handshake(body({ exts: [sni("allowed.test"), ext(21, Array<number>(4000).fill(0))] })), 1);
    expect(readIn(frag, 4096)).toEqual({ kind: "bad", reason: `no complete ClientHello within ${HELLO_STREAM} bytes` });
  });

  it("refuses bytes after the ClientHello inside its last record (a second handshake message)", () => {
    const hs = [...handshake(body()), ...handshake(body({ exts: [sni("other.test")] }))];
    expect(readIn(records(hs), 50)).toEqual({ kind: "bad", reason: "bytes after the ClientHello in its record" });
  });

  it("after a HelloRetryRequest, skips change_cipher_spec and early-data records before the second hello (only then)", () => {
    const ccs = Uint8Array.from([0x14, 3, 3, 0, 1, 1]);
    const early = Uint8Array.from([0x17, 3, 3, 0, 3, 1, 2, 3]);
    const h = hello({ exts: [sni("allowed.test")] });
    const stream = cat(early, ccs, h);
    const r = new ClientHelloReader({ maxStream: 100_000, skip: [0x14, 0x17] }).advance(stream);
    expect(r).toMatchObject({ kind: "message", end: stream.length });
    expect(new ClientHelloReader({ maxStream: 100_000, skip: [0x14] }).advance(stream)).toMatchObject({
      kind: "bad",
      reason: "record type application_data where the ClientHello was expected",
    });
    expect(
      new ClientHelloReader({ maxStream: 100_000, skip: [0x14, 0x17] }).advance(
        Uint8Array.from([0x17, 3, 3, 0x48, 0x01]),
      ),
    ).toMatchObject({ kind: "bad", reason: "a application_data record of 18433 bytes (over 2^14 + 256)" });
  });
});

describe("ClientHello parser", () => {
  it("finds the server name among many extensions, in any position; none without server_name or extensions", async () => {
    expect(parseClientHello(pbody())).toEqual({ serverName: "allowed.test", ech: false, extensions: [10, 0, 16] });
    const many = [
      GROUPS,
      ALPN,
      ext(43, [2, 3, 4]),
      ext(13, [0, 2, 4, 3]),
      ext(51, []),
      ext(0xfafa, []),
      sni("registry.npmjs.org"),
    ];
    expect(parseClientHello(pbody({ exts: many }))).toMatchObject({
      serverName: "registry.npmjs.org",
      extensions: [10, 16, 43, 13, 51, 0xfafa, 0],
    });
    expect(parseClientHello(pbody({ exts: [GROUPS, ALPN] }))).toEqual({ ech: false, extensions: [10, 16] });
    expect(parseClientHello(pbody({ noExtensions: true }))).toEqual({ ech: false, extensions: [] });
    expect(parseClientHello(pbody({ exts: [] }))).toEqual({ ech: false, extensions: [] });
    // node's own, with and without a server name (an empty servername sends none)
    const withName = await realHello({ servername: "Allowed.Test" });
    expect(parsed(readIn(withName, 99))).toMatchObject({ serverName: "Allowed.Test" });
    const without = await realHello({ servername: "" });
    expect((parsed(readIn(without, 99)) as { serverName?: string }).serverName).toBeUndefined();
  });

  it("marks ECH (final and draft code points) and ESNI", () => {
    for (const t of [0xfe0d, 0xfe0a, 0xffce])
      expect(parseClientHello(pbody({ exts: [sni("allowed.test"), ext(t, [1, 2, 3])] }))).toMatchObject({
        ech: true,
        serverName: "allowed.test",
      });
    expect(parseClientHello(pbody({ exts: [sni("allowed.test"), ext(0xfe0e, [])] }))).toMatchObject({ ech: false });
  });

  it("refuses bad lengths and shapes, naming what is wrong", () => {
    const cases: [number[], string][] = [
      [body({ version: 0x0200 }), "version 0x200 is not TLS"],
      [body({ session: 33 }), "session id over 32 bytes"],
      [body({ suites: [] }), "cipher suites of 0 bytes"],
      [body({ suites: [0x13, 0x01, 0x13] }), "cipher suites of 3 bytes"],
      [body({ comp: [] }), "no compression methods"],
      [body({ trailing: [0] }), "1 byte after the extensions"],
      [body({ exts: [sni("a.test"), sni("b.test")] }), "extension 0 appears twice"],
      [body({ exts: [GROUPS, GROUPS] }), "extension 10 appears twice"],
      [
        body({ exts: [ext(0, [...vec16([0, ...vec16(ascii("a.test")), 0, ...vec16(ascii("b.test"))])])] }),
        "more than one server name",
      ],
      [body({ exts: [sni("a.test", 1)] }), "server name type 1 (only host_name, 0, exists)"],
      [body({ exts: [sni("")] }), "an empty server name"],
      [body({ exts: [ext(0, vec16([]))] }), "an empty server name list"],
      [body({ exts: [ext(0, [...vec16([0, ...vec16(ascii("a.test"))]), 9])] }), "bytes after the server name list"],
      [body({ exts: [ext(0, [0, 50, 0, 0, 1, 97])] }), "server name list: needs 50 bytes, 4 left"],
      [body({ exts: [ext(0, [0, 4, 0, 0, 9, 97])] }), "server name: needs 9 bytes, 1 left"],
      [
        [...u16(0x0303), ...Array<number>(32).fill(0), 0, 0, 2, 0x13, 0x01, 1, 0, 0, 9, 0, 0],
        "extensions: needs 9 bytes, 2 left",
      ],
      [
        [...u16(0x0303), ...Array<number>(32).fill(0), 0, 0, 2, 0x13, 0x01, 1, 0, 0, 5, 0, 0, 0, 9, 1],
        "extension 0: needs 9 bytes, 1 left",
      ],
    ];
    for (const [b, reason] of cases)
      expect(parseClientHello(Uint8Array.from(b))).toBe(`malformed ClientHello (${reason})`);
  });

  it("never throws and never yields a server name from a truncated hello", async () => {
    const real = await realHello({ servername: "allowed.test" });
    const r = readIn(real, real.length);
    const full = (r as { body: Uint8Array }).body;
    for (let n = 0; n < full.length; n++) {
      const p = parseClientHello(full.subarray(0, n));
      if (typeof p !== "string") expect([n, p.serverName]).toEqual([n, undefined]); // a prefix that ends after the compression methods
    }
    // and the reader, given every prefix of the stream, says "more" until the last byte
    for (let n = 0; n < real.length; n++)
      expect(new ClientHelloReader({ maxStream: HELLO_STREAM }).advance(real.subarray(0, n)).kind).toBe("more");
  });

  it("keeps non-ASCII and control bytes out of the name", () => {
    expect(parseClientHello(pbody({ exts: [sni("allowed.test\u0000.evil\u001b[31m")] }))).toMatchObject({
      serverName: "allowed.test?.evil?[31m",
    });
  });
});

// ---- the server's first answer ----
const HRR = Buffer.from("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c", "hex");
const serverHello = (random: Uint8Array) => handshake([3, 3, ...random, 0, 0x13, 0x01, 0, 0, 0], 2);

describe("the server's first answer", () => {
  it("tells a HelloRetryRequest from a ServerHello, an alert and plain text, however fragmented", () => {
    expect(serverAnswer(records(serverHello(HRR)))).toBe("retry");
    expect(serverAnswer(records(serverHello(HRR), 1))).toBe("retry");
    expect(serverAnswer(records(serverHello(new Uint8Array(32).fill(5))))).toBe("other");
    expect(serverAnswer(Uint8Array.from([0x15, 3, 3, 0, 2, 2, 40]))).toBe("other");
    expect(serverAnswer(Uint8Array.from(Buffer.from("HTTP/1.1 400 Bad Request\r\n")))).toBe("other");
    expect(serverAnswer(records(handshake([1, 2, 3], 11)))).toBe("other");
    expect(serverAnswer(Uint8Array.from([0x16, 3, 3, 0, 0]))).toBe("other");
    const h = records(serverHello(HRR));
    for (let n = 0; n < 5 + 38; n++) expect([n, serverAnswer(h.subarray(0, n))]).toEqual([n, "more"]);
    expect(serverAnswer(h.subarray(0, 5 + 38))).toBe("retry");
  });
});

// ---- the gate ----
const bytesOf = (bufs: Uint8Array[]) => Buffer.concat(bufs.map((b) => Buffer.from(b)));
/** Feeds `stream` to the gate in `size`-byte pieces; everything it let go upstream, and its refusal. */
function feed(
  gate: TlsGate,
  stream: Uint8Array,
  size = stream.length,
  from: "client" | "server" = "client",
): { up: Buffer; refuse?: string } {
  const up: Uint8Array[] = [];
  for (let i = 0; i < stream.length; i += size) {
    const step =
      from === "client" ? gate.fromClient(stream.subarray(i, i + size)) : gate.fromServer(stream.subarray(i, i + size));
    up.push(...step.up);
    if (step.refuse) return { up: bytesOf(up), refuse: step.refuse };
  }
  return { up: bytesOf(up) };
}

describe("the tunnel's gate", () => {
  it("lets the hello up unchanged once it names the CONNECT host (case and a trailing dot aside), then holds the rest until the server answers", () => {
    for (const name of ["allowed.test", "ALLOWED.test", "allowed.test."]) {
      const gate = new TlsGate("allowed.test");
      const h = hello({ exts: [GROUPS, sni(name)] }, 40);
      const early = Uint8Array.from([0x17, 3, 3, 0, 1, 42]);
      const r = feed(gate, cat(h, early), 3);
      expect(r.refuse).toBeUndefined();
      expect(r.up.equals(Buffer.from(h))).toBe(true);
      expect([gate.state, gate.pending, gate.serverName]).toEqual(["answer", early.length, name]);
      // a ServerHello: the held bytes go up, and everything after passes as it comes
      const released = feed(gate, records(serverHello(new Uint8Array(32).fill(1))), 2, "server");
      expect(released.up.equals(Buffer.from(early))).toBe(true);
      expect(gate.state).toBe("open");
      expect(feed(gate, Uint8Array.from([1, 2, 3])).up).toEqual(Buffer.from([1, 2, 3]));
    }
  });

  it("refuses another server name, no server name, ECH, a malformed hello and plain text, with nothing sent up", () => {
    const cases: [Uint8Array, RegExp][] = [
      [
        hello({ exts: [sni("other.test")] }),
        /^the ClientHello's server name other\.test is not the CONNECT host allowed\.test$/,
      ],
      [hello({ exts: [sni("allowed.test.other.test")] }), /server name allowed\.test\.other\.test is not/],
      [hello({ exts: [GROUPS] }), /^the ClientHello names no server \(no SNI\); it must name allowed\.test$/],
      [hello({ noExtensions: true }), /no SNI/],
      [hello({ exts: [sni("allowed.test"), ext(0xfe0d, [0, 1])] }), /encrypted_client_hello \(ECH\)/],
      [
        hello({ exts: [sni("allowed.test"), sni("other.test")] }),
        /^malformed ClientHello \(extension 0 appears twice\)$/,
      ],
      [Uint8Array.from(Buffer.from("GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")), /^not a TLS handshake/],
    ];
    for (const [stream, reason] of cases) {
      const gate = new TlsGate("allowed.test");
      const r = feed(gate, stream, 1);
      expect(r.refuse).toMatch(reason);
      expect(r.up.length).toBe(0);
      expect(gate.state).toBe("refused");
      expect(gate.fromClient(Uint8Array.from([1])).up).toEqual([]);
    }
  });

  it("after a HelloRetryRequest checks the second ClientHello: the same name passes (after CCS), another is refused even if sent before the retry", () => {
    const first = hello({ exts: [sni("allowed.test")] });
    const ccs = Uint8Array.from([0x14, 3, 3, 0, 1, 1]);
    const hrr = records(serverHello(HRR));

    const ok = new TlsGate("allowed.test");
    feed(ok, first);
    expect(feed(ok, hrr, 7, "server").up.length).toBe(0);
    expect(ok.state).toBe("retry");
    const second = cat(ccs, hello({ exts: [GROUPS, sni("allowed.test")] }, 50));
    const r = feed(ok, second, 9);
    expect(r.refuse).toBeUndefined();
    expect(r.up.equals(Buffer.from(second))).toBe(true);
    expect(ok.state).toBe("open");

    // pipelined: the second hello (another name) right behind the first, before the server answered
    const evil = new TlsGate("allowed.test");
    const up = feed(evil, cat(first, hello({ exts: [sni("other.test")] })));
    expect(up.up.equals(Buffer.from(first))).toBe(true);
    const after = feed(evil, hrr, hrr.length, "server");
    expect(after.up.length).toBe(0);
    expect(after.refuse).toBe(
      "second ClientHello (after a HelloRetryRequest): the ClientHello's server name other.test is not the CONNECT host allowed.test",
    );

    const garbage = new TlsGate("allowed.test");
    feed(garbage, first);
    feed(garbage, hrr, hrr.length, "server");
    expect(feed(garbage, Uint8Array.from(Buffer.from("GET / HTTP/1.1\r\n\r\n"))).refuse).toMatch(
      /^second ClientHello \(after a HelloRetryRequest\): record type 0x47/,
    );
  });

  it("holds client bytes while the server has not answered, and releases them in order", () => {
    const gate = new TlsGate("allowed.test");
    feed(gate, hello());
    for (let i = 0; i < 10; i++) gate.fromClient(Uint8Array.from([i]));
    expect(gate.pending).toBe(10);
    const r = feed(gate, Uint8Array.from(Buffer.from("not tls at all")), 3, "server");
    expect([...r.up]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(gate.pending).toBe(0);
  });
});

describe("allow-list ports: CONNECT to 443, plain HTTP to 80, or the port an entry names", () => {
  const rules = (...e: string[]) => e.map((x) => parseAllowEntry(x) as AllowRule);
  it("an entry without a port", () => {
    const r = rules("registry.npmjs.org", "*.example.org");
    expect(isAllowed(r, "registry.npmjs.org", 443, "connect")).toBe(true);
    expect(isAllowed(r, "a.example.org", 443, "connect")).toBe(true);
    expect(isAllowed(r, "registry.npmjs.org", 80, "http")).toBe(true);
    expect(refusal(r, "registry.npmjs.org", 80, "connect")).toBe(
      "port 80: CONNECT only to port 443 or a port an allow-list entry names (host:port); registry.npmjs.org allows 443",
    );
    expect(refusal(r, "registry.npmjs.org", 443, "http")).toBe(
      "port 443: plain HTTP only to port 80 or a port an allow-list entry names (host:port); registry.npmjs.org allows 80",
    );
    expect(refusal(r, "registry.npmjs.org", 22, "connect")).toMatch(/^port 22: CONNECT only to port 443/);
    expect(refusal(r, "other.org", 443, "connect")).toBe("not on the allow-list");
  });
  it("an entry with a port allows that port both ways, and not the default", () => {
    const r = rules("mirror.example.org:8443", "mirror.example.org:8080");
    expect(isAllowed(r, "mirror.example.org", 8443, "connect")).toBe(true);
    expect(isAllowed(r, "mirror.example.org", 8080, "http")).toBe(true);
    expect(refusal(r, "mirror.example.org", 443, "connect")).toBe(
      "port 443: CONNECT only to port 443 or a port an allow-list entry names (host:port); mirror.example.org allows 8080, 8443",
    );
  });
});

describe("egress records are bounded where they are made", () => {
  it("a terminated tunnel's path loses its query and is bounded; a credential's name is bounded", () => {
    const r = boundRecord({
      host: "registry.example.org",
      port: 443,
      method: "GET",
      allowed: true,
      path: `/pkg\u001b[2J/${"p".repeat(5000)}?token=abc#frag`,
      credential: "c".repeat(500),
      bytesUp: 0,
      bytesDown: 0,
      ms: 1,
    });
    expect(r.path!.length).toBe(RECORD_BOUNDS.path);
    expect(r.path!.startsWith("/pkg?[2J/ppp")).toBe(true);
    expect(r.path).not.toMatch(/token|frag/);
    expect(boundRecord({ ...r, path: "/a/b?x=1#y" }).path).toBe("/a/b");
    expect(r.credential!.length).toBe(RECORD_BOUNDS.credential);
  });

  it("host ≤ 253 bytes, method and reason bounded, control characters and non-ASCII replaced, the port a port", () => {
    const r = boundRecord({
      host: `${"a".repeat(16 * 1024)}:443`,
      port: 99999,
      method: "X".repeat(1000),
      allowed: false,
      reason: `why\u001b[2J${"r".repeat(5000)}`,
      bytesUp: 0,
      bytesDown: 0,
      ms: 1,
    });
    expect(Buffer.byteLength(r.host)).toBe(RECORD_BOUNDS.host);
    expect(r.host.endsWith("...")).toBe(true);
    expect(r.method.length).toBe(RECORD_BOUNDS.method);
    expect(r.reason!.length).toBe(RECORD_BOUNDS.reason);
    expect(r.reason!.startsWith("why?[2J")).toBe(true);
    expect(r.port).toBe(0);
    expect(
      boundRecord({
        host: "é\u0000x",
        port: 443,
        method: "GET",
        allowed: true,
        address: "10.0.0.1",
        bytesUp: 1,
        bytesDown: 2,
        ms: 3,
      }),
    ).toEqual({
      host: "??x",
      port: 443,
      method: "GET",
      allowed: true,
      address: "10.0.0.1",
      bytesUp: 1,
      bytesDown: 2,
      ms: 3,
    });
    expect(bounded("a b", 10)).toBe("a?b");
    expect(bounded("a b", 10, true)).toBe("a b");
    expect(bounded("x".repeat(253), 253)).toBe("x".repeat(253));
  });
});
