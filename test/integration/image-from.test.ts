// `patchbay image build --from` has no network unless the caller names one: a Dockerfile's RUN
// cannot reach the host's loopback services, and an ADD of a URL (fetched by the engine itself,
// from its host, whatever the build's network) is refused before the build. `--network host`
// gives both back. The pure check of ADD instructions first, then the real CLI and engine.
//
// Backend: Docker (images, compose, the package's default sandbox).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isRemoteAdd, networkProblem, remoteAdds } from "../../src/sandbox/build-network.js";
import { ensureBuilt, patchbay } from "../support/cli-helpers.js";

describe("remoteAdds: the ADD instructions that may fetch a URL (pure)", () => {
  it("finds URLs in every spelling the engine's parser accepts, and variables", () => {
    const remote = [
      "ADD http://127.0.0.1:7474/api/jobs /x",
      "add HTTPS://example.org/a.tgz /x",
      "  ADD --chown=1000:1000 http://h/a /x",
      'ADD ["http://h/a", "/x"]',
      'ADD ["http:\\/\\/h/a", "/x"]',
      'ADD "http"://h/a /x',
      "ADD ht\\tp://h/a /x",
      "ADD $URL /x",
      "ADD ${URL:-local} /x",
      "ONBUILD ADD http://h/a /x",
      "ADD git@github.com:o/r.git /x",
    ];
    for (const r of remote) expect(isRemoteAdd(r), r).toBe(true);
    for (const ok of [
      "ADD app.tar.gz /opt/",
      "ADD --chown=1000:1000 a b /x/",
      'ADD ["a b", "/x"]',
      "COPY http.txt /x",
      "RUN curl http://h",
      "# ADD http://h /x",
      "ADDX http://h",
    ])
      expect(isRemoteAdd(ok), ok).toBe(false);
  });

  it("follows continuations, skipping the comment and empty lines inside them, and names the line", () => {
    const file = [
      "FROM base",
      "RUN echo \\",
      "  ADD http://not-an-add",
      "ADD \\",
      "# a comment",
      "",
      "  http:\\",
      "//127.0.0.1/x /x",
      "ADD local.tar /x",
      "ONBUILD ADD `",
      "  http://h/y /y",
    ].join("\n");
    expect(remoteAdds(file).map((a) => a.line)).toEqual([4, 10]);
    expect(remoteAdds("FROM x\nADD a /b\n")).toEqual([]);
  });

  it("takes network names, not options or container modes", () => {
    for (const ok of ["none", "host", "my-net_1.x"]) expect(networkProblem(ok)).toBeUndefined();
    for (const bad of ["", "container:abc", "--x", "a b", "x".repeat(200)])
      expect(networkProblem(bad)).toMatch(/network's name/);
  });
});

describe("image build --from and the network (real CLI and engine)", () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-image-net-"));
  const tag = (n: string) => `patchbay-test-net-${n}:${process.pid}`;
  const made: string[] = [];
  const hits: string[] = [];
  let server: http.Server;
  let port = 0;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url ?? "");
      res.end(`SECRET-FROM-LOOPBACK ${req.url}\n`);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as AddressInfo).port;
    await ensureBuilt();
  }, 300_000);
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    for (const t of made) execFileSync("docker", ["image", "rm", "-f", t], { stdio: "ignore" });
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const context = (name: string, dockerfile: string) => {
    const dir = path.join(tmp, name);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "Dockerfile"), dockerfile);
    return dir;
  };
  const build = (dir: string, t: string, ...more: string[]) => {
    made.push(t);
    return patchbay(["image", "build", "--from", dir, "--tag", t, "--json", ...more], {}, { timeoutMs: 600_000 });
  };
  const exists = (t: string) => {
    try {
      execFileSync("docker", ["image", "inspect", t], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  };
  const fetchRun = () =>
    `RUN bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}; printf "GET /run HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3 > /opt/run.txt'`;

  it("an ADD of a loopback URL is refused before the build, and the engine fetches nothing", async () => {
    const r = await build(
      context("add", `FROM patchbay-sandbox:latest\nUSER root\nADD http://127.0.0.1:${port}/api/jobs /opt/add.txt\n`),
      tag("add"),
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(
      /may fetch a URL with ADD.*line 3: "ADD http:\/\/127\.0\.0\.1:\d+\/api\/jobs \/opt\/add\.txt".*--network NAME/,
    );
    expect(hits).toEqual([]);
    expect(exists(tag("add"))).toBe(false);
  }, 600_000);

  it("an ONBUILD ADD of a base image is refused the same way", async () => {
    const base = tag("onbuild-base");
    made.push(base);
    execFileSync(
      "docker",
      [
        "build",
        "-q",
        "--network",
        "none",
        "-t",
        base,
        context("onbuild-base", `FROM patchbay-sandbox:latest\nONBUILD ADD http://127.0.0.1:${port}/onbuild /tmp/x\n`),
      ],
      { stdio: "pipe" },
    );
    const r = await build(context("onbuild", `FROM ${base}\n`), tag("onbuild"));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/ONBUILD of patchbay-test-net-onbuild-base/);
    expect(hits).toEqual([]);
  }, 600_000);

  it("a RUN that reaches for a loopback server fails the build", async () => {
    const r = await build(context("run", `FROM patchbay-sandbox:latest\nUSER root\n${fetchRun()}\n`), tag("run"));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/docker build of .* failed/);
    expect(hits).toEqual([]);
    expect(exists(tag("run"))).toBe(false);
  }, 600_000);

  it("with --network host both work: the RUN's and the ADD's bytes are in the image", async () => {
    const t = tag("host");
    const r = await build(
      context(
        "host",
        `FROM patchbay-sandbox:latest\nUSER root\n${fetchRun()}\nADD http://127.0.0.1:${port}/add /opt/add.txt\nRUN chmod 644 /opt/add.txt\nUSER agent\n`,
      ),
      t,
      "--network",
      "host",
    );
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ tag: t, how: "built", check: { uid: "1000", git: true } });
    const inside = execFileSync(
      "docker",
      ["run", "--rm", "--network", "none", t, "cat", "/opt/run.txt", "/opt/add.txt"],
      { encoding: "utf8" },
    );
    expect(inside).toMatch(/SECRET-FROM-LOOPBACK \/run\n[\s\S]*SECRET-FROM-LOOPBACK \/add\n/);
    expect(hits.sort()).toEqual(["/add", "/run"]);
    // The same context without the network is another recipe: not taken from the cache, refused.
    const again = await build(path.join(tmp, "host"), t);
    expect(again.code, again.stderr).toBe(1);
    expect(again.stderr).toMatch(/may fetch a URL with ADD/);
  }, 600_000);

  it("--network is documented, checked, and only for --from", async () => {
    const help = await patchbay(["image", "build", "--help"]);
    expect(help.stdout + help.stderr).toMatch(/--network NAME/);
    const noFrom = await patchbay(["image", "build", "--network", "host"]);
    expect(noFrom.code).toBe(2);
    expect(noFrom.stderr).toMatch(/--network is for --from builds/);
    const bad = await patchbay(["image", "build", "--from", tmp, "--tag", "x:y", "--network", "container:abc"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--network takes a Docker network's name/);
  });
});
