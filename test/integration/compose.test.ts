// docker-compose.yml and the worker image recipe, checked without pulling or building anything:
// `docker-compose config` (v1, Debian's `docker-compose` package) validates and normalizes the file,
// and the assertions read its YAML output, whose layout (2-space indent, one list item a line) is fixed.
//
// Backend: Docker (images, compose, the package's default sandbox).
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import { removeDir } from "../support/cluster.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const COMPOSE = `${ROOT}docker-compose.yml`;

const PASSWORD = "compose-test-password-0123";

/** The host's env without patchbay's knobs, so defaults are what gets checked; plus a key and Redis's password to pass through. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(PATCHBAY_|ANTHROPIC_|REDIS_URL$|COMPOSE_|DOCKER_)/.test(k)) env[k] = v;
  }
  return { ...env, ANTHROPIC_API_KEY: "sk-compose-test", PATCHBAY_REDIS_PASSWORD: PASSWORD };
}

let cached: string | undefined;
function config(): string {
  if (cached !== undefined) return cached;
  try {
    cached = execFileSync("docker-compose", ["-f", COMPOSE, "config"], {
      cwd: ROOT,
      env: cleanEnv(),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    return cached;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === "ENOENT")
      throw new Error("docker-compose is not installed: run `apt-get install -y docker-compose` (CI installs it)", {
        cause: err,
      });
    throw new Error(`docker-compose config rejected ${COMPOSE}: ${e.stderr ?? e.message}`, { cause: err });
  }
}

/** The lines under `key:` at `indent` (v1 prints list items at the key's own indent, after "- "). */
function block(text: string, key: string, indent: number): string {
  const lines = text.split("\n");
  const pad = " ".repeat(indent);
  const start = lines.findIndex((l) => l === `${pad}${key}:` || l.startsWith(`${pad}${key}: `));
  if (start < 0) throw new Error(`no '${key}:' at indent ${indent} in:\n${text}`);
  const out = [lines[start]!];
  for (const l of lines.slice(start + 1)) {
    if (l.trim() === "") continue;
    const own = l.length - l.trimStart().length;
    if (own > indent || (own === indent && l.startsWith(`${pad}- `))) out.push(l);
    else break;
  }
  return out.join("\n");
}

const service = (name: string) => block(block(config(), "services", 0), name, 2);

/** "45s", "1m30s", "500ms" → milliseconds. */
function durationMs(s: string): number {
  let ms = 0;
  for (const [, n, unit] of s.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g))
    ms += Number(n) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as "ms"];
  return ms;
}

describe("docker-compose.yml (validated by docker-compose config)", () => {
  it("redis: bounded by maxmemory (1gb, PATCHBAY_REDIS_MAXMEMORY overrides it) with noeviction: full, it refuses writes and drops nothing", () => {
    expect(service("redis")).toMatch(/- --maxmemory\n\s*- 1gb\n\s*- --maxmemory-policy\n\s*- noeviction\n?/);
    const other = execFileSync("docker-compose", ["-f", COMPOSE, "config"], {
      cwd: ROOT,
      env: { ...cleanEnv(), PATCHBAY_REDIS_MAXMEMORY: "256mb" },
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(block(block(other, "services", 0), "redis", 2)).toMatch(/- --maxmemory\n\s*- 256mb\n/);
    expect(block(service("worker"), "environment", 4)).toMatch(/PATCHBAY_RETENTION_SEC: '604800'$/m);
    expect(loadConfig({}).retentionSec).toBe(604800);
    // the image's own command (a plain `docker run`) has the same bound
    expect(readFileSync(`${ROOT}images/redis/Dockerfile`, "utf8")).toMatch(
      /^CMD \[.*"--maxmemory", "1gb", "--maxmemory-policy", "noeviction"\]$/m,
    );
  });

  it("redis: AOF on, noeviction (BullMQ), protected mode off (Debian's default refuses the workers), a ping healthcheck, a volume for /data, no published port", () => {
    const redis = service("redis");
    expect(redis).toMatch(/^\s{4}image: patchbay-redis:latest$/m);
    expect(redis).toMatch(/context: \S*images\/redis$/m);
    expect(redis).toMatch(/- --protected-mode\n\s*- "?no"?\n/);
    expect(redis).toMatch(/- --appendonly\n\s*- "?yes"?\n/);
    expect(redis).toMatch(/- --maxmemory-policy\n\s*- noeviction\n?/);
    expect(redis).toMatch(/healthcheck:[\s\S]*- CMD-SHELL\n\s*- redis-cli ping \| grep -qx PONG\n/);
    expect(redis).toMatch(/- redis-data:\/data(:rw)?\n?/);
    expect(redis).not.toMatch(/^\s{4}ports:/m);
    expect(block(config(), "volumes", 0)).toMatch(/redis-data:/);
  });

  it("redis: requires PATCHBAY_REDIS_PASSWORD (requirepass; the healthcheck's redis-cli gets it by REDISCLI_AUTH), and compose refuses to start without one", () => {
    const redis = service("redis");
    expect(redis).toMatch(new RegExp(`- --requirepass\n\\s*- ${PASSWORD}\n`));
    expect(block(redis, "environment", 4)).toMatch(new RegExp(`REDISCLI_AUTH: ${PASSWORD}$`, "m"));
    const { PATCHBAY_REDIS_PASSWORD: _, ...without } = cleanEnv();
    const emptyDir = mkdtempSync(join(tmpdir(), "pb-compose-noenv-")); // no .env there either
    try {
      cpSync(COMPOSE, join(emptyDir, "docker-compose.yml"));
      const r = spawnSync("docker-compose", ["-f", join(emptyDir, "docker-compose.yml"), "config"], {
        cwd: emptyDir,
        env: without,
        encoding: "utf8",
      });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/set PATCHBAY_REDIS_PASSWORD in \.env \(npm run compose:up writes one\)/);
    } finally {
      removeDir(emptyDir);
    }
    expect(readFileSync(COMPOSE, "utf8")).not.toMatch(/no auth/i);
  });

  it("compose:up writes a random password to a git-ignored .env (mode 600) once, never printing it, and leaves a set one alone", () => {
    const dir = mkdtempSync(join(tmpdir(), "pb-compose-up-"));
    try {
      // The script as shipped, in a copy of the tree with only it; a stub docker-compose answers
      // `version`, and the script stops at the missing services.sh, after the password step.
      mkdirSync(join(dir, "scripts"));
      mkdirSync(join(dir, "bin"));
      cpSync(`${ROOT}scripts/compose-up.sh`, join(dir, "scripts/compose-up.sh"));
      writeFileSync(join(dir, "bin/docker-compose"), "#!/bin/sh\nexit 0\n");
      chmodSync(join(dir, "bin/docker-compose"), 0o755);
      const { PATCHBAY_REDIS_PASSWORD: _, ...env } = cleanEnv();
      const up = (extra: NodeJS.ProcessEnv = {}) =>
        spawnSync("bash", ["scripts/compose-up.sh"], {
          cwd: dir,
          env: { ...env, ...extra, PATH: `${join(dir, "bin")}:${env.PATH}` },
          encoding: "utf8",
        });
      const first = up();
      const text = readFileSync(join(dir, ".env"), "utf8");
      const pw = text.match(/^PATCHBAY_REDIS_PASSWORD=([0-9a-f]{48})$/m)?.[1];
      expect(pw, text).toBeDefined();
      expect(statSync(join(dir, ".env")).mode & 0o777).toBe(0o600);
      expect(first.stdout + first.stderr).not.toContain(pw);
      expect(first.stderr).toMatch(/wrote a random Redis password to .*\.env/);
      up();
      expect(readFileSync(join(dir, ".env"), "utf8")).toBe(text); // kept, not appended to
      removeDir(join(dir, ".env"));
      up({ PATCHBAY_REDIS_PASSWORD: "set-by-the-user" });
      expect(existsSync(join(dir, ".env"))).toBe(false);
    } finally {
      removeDir(dir);
    }
    expect(execFileSync("git", ["check-ignore", ".env"], { cwd: ROOT, encoding: "utf8" }).trim()).toBe(".env");
  });

  it("worker: built from images/worker/Dockerfile as patchbay-worker:latest, runs `worker`, waits for a healthy redis", () => {
    const w = service("worker");
    expect(w).toMatch(/^\s{4}image: patchbay-worker:latest$/m);
    expect(w).toMatch(/dockerfile: images\/worker\/Dockerfile/);
    expect(block(w, "command", 4)).toMatch(/- worker$/m);
    expect(block(w, "depends_on", 4)).toMatch(/redis:\n\s*condition: service_healthy/);
    expect(w).toMatch(/^\s{4}restart: unless-stopped$/m);
  });

  it("worker: talks to the compose redis and passes the API key and knobs through with defaults", () => {
    const env = block(service("worker"), "environment", 4);
    expect(env).toMatch(new RegExp(`REDIS_URL: redis://:${PASSWORD}@redis:6379$`, "m"));
    expect(env).toMatch(/ANTHROPIC_API_KEY: sk-compose-test$/m);
    expect(env).toMatch(/ANTHROPIC_BASE_URL: /);
    expect(env).toMatch(/PATCHBAY_CONCURRENCY: '2'$/m);
    expect(env).toMatch(/PATCHBAY_IMAGE: patchbay-sandbox:latest$/m);
    expect(env).toMatch(/PATCHBAY_QUEUE: patchbay$/m);
  });

  it("worker: mounts the Docker socket (sibling sandboxes) and the repos directory read-only at its own path", () => {
    const vols = block(service("worker"), "volumes", 4);
    expect(vols).toMatch(/- \/var\/run\/docker\.sock:\/var\/run\/docker\.sock(:rw)?$/m);
    // The same absolute path inside as outside: a path the host's client checked is the one the worker reads.
    expect(vols).toMatch(/^\s*- \/srv\/patchbay\/repos:\/srv\/patchbay\/repos:ro$/m);
    // The egress proxy's sockets: the engine mounts them into sandboxes by their host path.
    expect(vols).toMatch(/^\s*- \/var\/tmp\/patchbay-egress:\/var\/tmp\/patchbay-egress(:rw)?$/m);
    expect(block(service("worker"), "environment", 4)).toMatch(/PATCHBAY_EGRESS_DIR: \/var\/tmp\/patchbay-egress$/m);
  });

  it("worker: scalable (no container_name, no host ports), no second init (the image's tini is PID 1), a grace period longer than the drain", () => {
    const w = service("worker");
    expect(w).not.toMatch(/container_name:/);
    expect(w).not.toMatch(/^\s{4}ports:/m);
    expect(w).not.toMatch(/^\s{4}init: true$/m);
    const grace = w.match(/^\s{4}stop_grace_period: (\S+)$/m)?.[1];
    expect(grace, "stop_grace_period").toBeDefined();
    expect(durationMs(grace!)).toBeGreaterThan(loadConfig({}).drainDeadlineMs);
  });
});

describe("images/worker/Dockerfile", () => {
  const dockerfile = readFileSync(`${ROOT}images/worker/Dockerfile`, "utf8");

  it("compiles in a build stage and runs the compiled CLI from production dependencies, with git for host-side clones", () => {
    expect(dockerfile).toMatch(/^FROM node:20-bookworm-slim AS build$/m);
    expect(dockerfile).toMatch(/^RUN npm ci --no-audit --no-fund$/m); // runs `prepare`: tsc → dist/
    expect(dockerfile).toMatch(/^COPY --from=build \/app\/dist\/ dist\/$/m);
    expect(dockerfile).toMatch(/apt-get install[^\n]*\bgit\b[^\n]*\bca-certificates\b[^\n]*\btini\b/);
    expect(dockerfile).toMatch(/npm ci --omit=dev --ignore-scripts/);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "node", "bin\/patchbay\.js"\]$/m);
    expect(dockerfile).toMatch(/^CMD \["worker"\]$/m);
    const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")) as {
      dependencies: Record<string, string>;
      scripts: Record<string, string>;
    };
    expect(Object.keys(pkg.dependencies)).not.toContain("tsx"); // the runtime needs no TypeScript runner
    expect(pkg.scripts.prepare).toMatch(/npm run build/);
  });

  it("copies only files that exist and that .dockerignore keeps", () => {
    const ignored = readFileSync(`${ROOT}.dockerignore`, "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    expect(ignored).toEqual(expect.arrayContaining(["node_modules", ".git"]));
    const sources = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
    expect(sources.length).toBeGreaterThan(0);
    for (const src of sources) {
      expect(existsSync(`${ROOT}${src}`), src).toBe(true);
      expect(
        ignored.some((p) => src.replace(/\/$/, "") === p || src.startsWith(`${p}/`)),
        `${src} is dockerignored`,
      ).toBe(false);
    }
  });
});

describe("the offline recipes (scripts/compose-images.sh) match the Dockerfiles", () => {
  const read = (p: string) => readFileSync(`${ROOT}${p}`, "utf8");
  const list = (p: string) =>
    read(p)
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
  const line = (text: string, instr: string) => text.match(new RegExp(`^${instr} .*$`, "m"))?.[0];

  it("worker: the same Debian packages, entrypoint (tini), command and layout as images/worker/Dockerfile", () => {
    const online = read("images/worker/Dockerfile");
    const offline = read("images/worker/Dockerfile.offline");
    const apt = online
      .match(/apt-get install -y --no-install-recommends ([^\\\n]+)/)![1]!
      .trim()
      .split(/\s+/);
    expect(list("images/worker/packages.txt").sort()).toEqual(apt.sort());
    for (const instr of ["ENTRYPOINT", "CMD", "WORKDIR", "ENV"])
      expect(line(offline, instr), instr).toBe(line(online, instr));
    expect(offline).toMatch(/^FROM \$\{BASE\}$/m);
    expect(offline).not.toMatch(/^RUN /m); // builds with --network none, no registry
  });

  it("redis: the same package, user, data directory and command as images/redis/Dockerfile", () => {
    const online = read("images/redis/Dockerfile");
    const offline = read("images/redis/Dockerfile.offline");
    expect(online).toMatch(/apt-get install -y --no-install-recommends redis-server/);
    expect(list("images/redis/packages.txt")).toEqual(["redis-server"]);
    for (const instr of ["CMD", "WORKDIR", "USER", "EXPOSE"])
      expect(line(offline, instr), instr).toBe(line(online, instr));
    expect(offline).not.toMatch(/^RUN /m);
  });

  it("both images are built under the names the compose file runs", () => {
    const script = read("scripts/compose-images.sh");
    expect(script).toMatch(/^WORKER_TAG=patchbay-worker:latest$/m);
    expect(script).toMatch(/^REDIS_TAG=patchbay-redis:latest$/m);
    expect(service("worker")).toMatch(/image: patchbay-worker:latest/);
    expect(service("redis")).toMatch(/image: patchbay-redis:latest/);
  });
});
