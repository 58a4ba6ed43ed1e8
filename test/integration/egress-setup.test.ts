// Setup-phase egress through runJob, in real sandboxes: setup commands reach allowed hosts through
// the bridge and the worker's proxy; a host off the list, an IP literal, a redirect off the list and
// the worker's own loopback ports are refused and recorded; when setup ends the path is gone (old
// bridge port, socket, proxy variables). Upstreams are a test host in a network namespace, exempted
// through the proxy's test-only options (which a JobSpec cannot set).
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { lookup } from "node:dns/promises";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { runJob } from "../../src/job/run.js";
import { EgressProxy } from "../../src/net/proxy.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import type { EventOf, TranscriptEvent } from "../../src/core/spec/spec.js";
import {
  reply,
  startFakeAnthropic,
  text,
  toolResults,
  toolResultText,
  toolUse,
  type FakeAnthropic,
} from "../support/fake-anthropic.js";
import { withLag } from "../support/lag.js";
import { startNetHost, type NetHost } from "../support/netns.js";
import { startTlsHost, type TlsHost } from "../support/tls-host.js";

let host: NetHost;
let tlsHost: TlsHost;
let fake: FakeAnthropic | undefined;
const dirs: string[] = [];
beforeAll(async () => {
  host = await startNetHost(1);
  tlsHost = await startTlsHost(2, ["secure.test", "shared.test"]);
});
afterAll(async () => {
  host?.close();
  await tlsHost?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const proxy = () =>
  new EgressProxy({
    allowPrivate: ["10.213.0.0/16", `${tlsHost.ip}/32`],
    resolve: async (h) =>
      h === "allowed.test" || h === "other.test"
        ? [host.ip]
        : h === "secure.test" || h === "shared.test"
          ? [tlsHost.ip]
          : (await lookup(h, { all: true })).map((a) => a.address),
  });

// Each probe prints one line: the URL and what came back (status and body, or the error).
const PROBE = String.raw`
import sys, urllib.request
for u in sys.argv[1:]:
    try:
        r = urllib.request.urlopen(u, timeout=30)
        print(u, "->", r.status, r.read().decode()[:60])
    except urllib.error.HTTPError as e:
        print(u, "->", e.code, e.read().decode()[:160].strip())
    except Exception as e:
        print(u, "-> error", e)
`;

// From inside the sandbox: HTTPS to the allowed name, then raw tunnels through the setup proxy
// variable whose TLS names another site on the same address, or none, and a CONNECT to port 80.
const SNI_PROBE = String.raw`
import os, socket, ssl, urllib.request
host, port = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].split(":")
ca = "/workspace/ca.pem"
print("named:", urllib.request.urlopen("https://secure.test/", context=ssl.create_default_context(cafile=ca), timeout=30).read().decode())
def tunnel(target, name):
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(4096)
        if not c: break
        head += c
    if b" 200 " not in head.split(b"\r\n")[0]: return head.decode().split("\r\n")[0] + " | " + head.decode().split("\r\n\r\n", 1)[-1].strip()
    ctx = ssl.create_default_context(cafile=ca); ctx.check_hostname = False
    try:
        t = ctx.wrap_socket(s, server_hostname=name)
        t.sendall(b"GET / HTTP/1.1\r\nHost: shared.test\r\nConnection: close\r\n\r\n")
        return "reached: " + t.recv(4096).decode().split("\r\n\r\n")[-1]
    except Exception as e:
        return "cut (%s)" % type(e).__name__
print("other name:", tunnel("secure.test:443", "shared.test"))
print("no name:", tunnel("secure.test:443", None))
print("port 80:", tunnel("secure.test:80", "secure.test"))
`;

function repo(): string {
  const d = mkdtempSync(join(tmpdir(), "pb-egress-"));
  dirs.push(d);
  writeFileSync(join(d, "probe.py"), PROBE);
  writeFileSync(join(d, "README"), "egress test repo\n");
  return d;
}

const egressEvents = (events: TranscriptEvent[]) => events.filter((e): e is EventOf<"egress"> => e.type === "egress");

describe("setup network through the egress proxy", () => {
  it("allowed hosts are reached; a host off the list, an IP literal, a redirect off the list and the worker's own ports are refused and recorded; the agent phase has no path out", async () => {
    let port = 0;
    let sandbox: Sandbox | undefined;
    const rootChecks: string[] = [];
    const urls = [
      "http://allowed.test:8080/ok",
      "https://other.test/",
      `http://${host.ip}:8080/ok`,
      `http://allowed.test:8080/redirect?to=http%3A%2F%2Fother.test%3A8080%2Fok`,
      "http://localhost:6379/",
      "https://localhost:6379/",
    ];
    fake = await startFakeAnthropic(async ({ index }) => {
      if (index === 0) {
        // The agent phase has begun: as root in the container, the socket is gone and cannot be reached.
        const r = await sandbox!.exec(
          [
            "sh",
            "-c",
            "ls -A /patchbay-egress; echo ls=$?; python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"/patchbay-egress/proxy.sock\")' 2>&1 | tail -1",
          ],
          { user: "0:0" },
        );
        rootChecks.push(r.stdout.toString());
        const cmd = [
          `env | grep -ic proxy; echo vars=$?`,
          `python3 -c 'import socket; socket.create_connection(("127.0.0.1", ${port}), timeout=5)' 2>&1 | tail -1`,
          `HTTPS_PROXY=http://127.0.0.1:${port} HTTP_PROXY=http://127.0.0.1:${port} python3 /workspace/probe.py http://allowed.test:8080/ok https://allowed.test/`,
        ].join("; ");
        return reply(toolUse("bash", { command: cmd }));
      }
      return reply(text("Done."));
    });
    const events: TranscriptEvent[] = [];
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
    const result = await runJob(
      {
        task: "Look around.",
        repo: { path: repo() },
        setup: [
          `python3 probe.py ${urls.map((u) => `'${u}'`).join(" ")}`,
          "python3 probe.py http://allowed.test:8080/ok",
        ],
        network: { setup: { allow: ["allowed.test:8080", "localhost:6379", "localhost"] } },
      },
      {
        model,
        egress: proxy(),
        onEvent: (e) => events.push(e),
        onEgressBridge: (p) => (port = p),
        onSandbox: (sb) => (sandbox = sb),
      },
    );
    expect(result.status).toBe("completed");
    const setupOut = (events.find((e) => e.type === "setup") as EventOf<"setup">).outputTail;
    const lines = setupOut.trim().split("\n");
    expect(lines[0]).toBe("http://allowed.test:8080/ok -> 200 hello from netns, host header allowed.test:8080");
    expect(lines[1]).toMatch(/^https:\/\/other\.test\/ -> error .*Tunnel connection failed: 403/);
    expect(lines[2]).toMatch(/-> 403 patchbay egress: 10\.213\.\d+\.2:8080 refused: IP literals are not allowed/);
    expect(lines[3]).toMatch(/-> 403 patchbay egress: redirect from allowed\.test to other\.test:8080 refused/);
    expect(lines[4]).toMatch(/-> 403 patchbay egress: localhost:6379 refused: resolves to a loopback address/);
    expect(lines[5]).toMatch(/^https:\/\/localhost:6379\/ -> error .*Tunnel connection failed: 403/);

    const eg = egressEvents(events);
    expect(eg.map((e) => [e.method, e.host, e.port, e.allowed, e.reason ?? null])).toEqual([
      ["GET", "allowed.test", 8080, true, null],
      ["CONNECT", "other.test", 443, false, "not on the allow-list"],
      ["GET", host.ip, 8080, false, "IP literals are not allowed"],
      ["GET", "allowed.test", 8080, false, "redirect to other.test:8080: not on the allow-list"],
      ["GET", "localhost", 6379, false, expect.stringMatching(/^resolves to a loopback address/)],
      ["CONNECT", "localhost", 6379, false, expect.stringMatching(/^resolves to a loopback address/)],
      ["GET", "allowed.test", 8080, true, null],
    ]);
    expect(eg[0]!.bytesDown).toBeGreaterThan(40);
    expect(result.egress).toEqual({
      allowed: 2,
      refused: 5,
      bytesUp: 0,
      bytesDown: eg[0]!.bytesDown + eg[6]!.bytesDown,
      // What was refused, once each: what a campaign's pull request lists.
      refusals: [...new Set(eg.filter((e) => !e.allowed).map((e) => `${e.host}:${e.port} (${e.reason})`))],
    });
    expect(result.egress!.refusals).toHaveLength(4); // localhost:6379 refused twice (GET, CONNECT) for one reason
    // Every egress event comes before the agent's first model request.
    const firstModel = events.findIndex((e) => e.type === "model_request");
    expect(events.map((e) => e.type).lastIndexOf("egress")).toBeLessThan(firstModel);

    // Agent phase: no proxy variables, the old bridge port refused, the proxy unreachable with them set by hand.
    const out = toolResultText(toolResults(fake.requests[1])[0]);
    expect(port).toBeGreaterThan(0);
    expect(out).toMatch(/^0\nvars=1\n/);
    expect(out).toMatch(/ConnectionRefusedError: \[Errno 111\] Connection refused/);
    expect(out).toMatch(
      /http:\/\/allowed\.test:8080\/ok -> error .*(Connection refused|Name or service not known|Temporary failure)/,
    );
    expect(out).toMatch(/https:\/\/allowed\.test\/ -> error/);
    expect(out).not.toMatch(/-> 200/);
    expect(rootChecks[0]).toMatch(/^ls=0\n/); // the directory is empty
    expect(rootChecks[0]).toMatch(/FileNotFoundError|No such file/);
    expect(egressEvents(events)).toHaveLength(7); // nothing more was proxied
  });

  it("from a sandbox: HTTPS to the allowed name passes; TLS naming another site on its address, or none, is cut; CONNECT to port 80 is refused", async () => {
    const d = repo();
    writeFileSync(join(d, "ca.pem"), tlsHost.ca);
    writeFileSync(join(d, "sni.py"), SNI_PROBE);
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    const events: TranscriptEvent[] = [];
    const before = tlsHost.connections[443]!;
    // exit 3 on purpose: the output is in the error, and no model is needed
    const r = await runJob(
      { task: "t", repo: { path: d }, setup: "python3 sni.py; exit 3", network: { setup: { allow: ["secure.test"] } } },
      { model, egress: proxy(), onEvent: (e) => events.push(e) },
    );
    const out = r.error!.split("\n");
    expect(out).toContain("named: tls 443 sni=secure.test host=secure.test");
    expect(out.find((l) => l.startsWith("other name:"))).toMatch(
      /^other name: cut \((SSLEOFError|ConnectionResetError|SSLZeroReturnError|SSLError)\)$/,
    );
    expect(out.find((l) => l.startsWith("no name:"))).toMatch(/^no name: cut \(/);
    expect(out.find((l) => l.startsWith("port 80:"))).toBe(
      "port 80: HTTP/1.1 403 Forbidden | patchbay egress: secure.test:80 refused: port 80: CONNECT only to port 443 or a port an allow-list entry names (host:port); secure.test allows 443",
    );
    expect(egressEvents(events).map((e) => [e.method, e.host, e.port, e.allowed, e.reason ?? null])).toEqual([
      ["CONNECT", "secure.test", 443, true, null],
      [
        "CONNECT",
        "secure.test",
        443,
        false,
        "the ClientHello's server name shared.test is not the CONNECT host secure.test",
      ],
      ["CONNECT", "secure.test", 443, false, "the ClientHello names no server (no SNI); it must name secure.test"],
      ["CONNECT", "secure.test", 80, false, expect.stringMatching(/^port 80: CONNECT only to port 443/)],
    ]);
    expect(tlsHost.connections[443]! - before).toBe(1); // only the named one reached the server
    expect(tlsHost.names).not.toContain("shared.test");
  });

  it("a setup that needs a refused host fails with a message naming it; without network at all the message says how to allow hosts", async () => {
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    const spec = {
      task: "t",
      repo: { path: repo() },
      setup: "python3 -c 'import urllib.request; urllib.request.urlopen(\"https://other.test/x\", timeout=30)'",
    };
    const refused = await runJob(
      { ...spec, network: { setup: { allow: ["allowed.test:8080"] } } },
      { model, egress: proxy() },
    );
    expect(refused.status).toBe("failed");
    expect(refused.error).toMatch(
      /^setup command failed \(exit 1\): .*\nrefused by the egress proxy: other\.test:443 \(not on the allow-list\)\n/,
    );
    expect(refused.egress).toEqual({
      allowed: 0,
      refused: 1,
      bytesUp: 0,
      bytesDown: 0,
      refusals: ["other.test:443 (not on the allow-list)"],
    });
    const none = await runJob(spec, { model });
    expect(none.status).toBe("failed");
    expect(none.error).toMatch(/setup had no network: allow hosts with network\.setup\.allow/);
    expect(none.egress).toBeUndefined();
  });

  it("setup cannot signal the egress bridge or write into its pipes (nor the other root pythons): its requests still pass after the tries", async () => {
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    // Setup (uid 1000) tries every root python of the box, the bridge among them: a write into its
    // stdin and stdout (the bridge's stdin ending stops it), SIGSTOP and SIGKILL. Then a request
    // through the bridge; the last command fails on purpose, so that no model is needed.
    const attack = [
      "n=0; for p in $(pgrep -f 'python3 -I -S'); do for fd in 0 1; do (printf x > /proc/$p/fd/$fd) 2>/dev/null && n=$((n+1)); done",
      "kill -STOP $p 2>/dev/null && n=$((n+1)); kill -KILL $p 2>/dev/null && n=$((n+1)); done",
      "echo pythons=$(pgrep -fc 'python3 -I -S') bridges=$(pgrep -fc proxy.sock) reached=$n",
    ].join("; ");
    const events: TranscriptEvent[] = [];
    const r = await runJob(
      {
        task: "t",
        repo: { path: repo() },
        setup: [attack, "python3 probe.py http://allowed.test:8080/ok", "exit 3"],
        network: { setup: { allow: ["allowed.test:8080"] } },
      },
      { model, egress: proxy(), onEvent: (e) => events.push(e) },
    );
    expect(r.error).toMatch(/^setup command failed \(exit 3\): exit 3/);
    const [tried, probed] = events.filter((e): e is EventOf<"setup"> => e.type === "setup").map((e) => e.outputTail);
    const m = /^pythons=(\d+) bridges=(\d+) reached=(\d+)$/m.exec(tried ?? "");
    expect(m, tried).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThanOrEqual(4); // the helper, the supervisor, the file agent and the bridge
    expect([m![2], m![3]]).toEqual(["1", "0"]);
    expect(probed).toMatch(/^http:\/\/allowed\.test:8080\/ok -> 200 hello from netns/);
  });

  it("under gVisor without --host-uds=open the bridge cannot reach the socket, and setup fails saying so", async () => {
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    const r = await runJob(
      {
        task: "t",
        repo: { path: repo() },
        runtime: "runsc",
        setup: "true",
        network: { setup: { allow: ["allowed.test:8080"] } },
      },
      { model, egress: proxy() },
    );
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(
      /^the setup network bridge could not start: .*\(under gVisor the runtime needs --host-uds=open\)$/,
    );
  });

  it("several sandboxes' setups hold many connections at once through one proxy without blocking the event loop", async () => {
    const p = new EgressProxy({ allowPrivate: ["10.213.0.0/16"], resolve: async () => [host.ip] });
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    // 40 requests at once per sandbox, each held 3 s by the upstream; the setup then fails on purpose
    // (exit 3) so that no model is needed.
    const setup = `python3 -c '
import urllib.request, concurrent.futures as f
def one(i): return urllib.request.urlopen("http://allowed.test:8080/slow?s=3", timeout=60).status
with f.ThreadPoolExecutor(40) as ex: r = list(ex.map(one, range(40)))
print(r.count(200), "ok")' ; exit 3`;
    const results = await withLag(() =>
      Promise.all(
        [0, 1, 2].map(() =>
          runJob(
            { task: "t", repo: { path: repo() }, setup, network: { setup: { allow: ["allowed.test:8080"] } } },
            { model, egress: p },
          ),
        ),
      ),
    );
    if (!results.value) throw results.error;
    for (const r of results.value) {
      expect(r.error).toMatch(/exit 3\).*\n40 ok/s);
      expect(r.egress).toMatchObject({ allowed: 40, refused: 0 });
    }
    console.log(
      `egress: 3 sandboxes × 40 concurrent setup requests, event-loop lag ${results.lagMs} ms (wall ${results.wallMs} ms)`,
    );
    expect(results.lagMs).toBeLessThan(100);
  });
});
