// A real private npm registry for the tests of credentials the egress proxy adds: verdaccio 6.8
// (node_modules/verdaccio) in a child process with its own config and storage in a temporary
// directory, on a loopback address of its own (127.217.<pid % 250>.<index + 1>) over HTTPS with a
// certificate for a test name ("registry.test") that a CA made for it signs (test-ca.ts). Every
// package needs a logged-in user to read or publish, it has no uplink (it serves only what was
// published to it: nothing reaches the internet), and it admits one registration, the helper's
// own during start-up. It holds one package that exists nowhere else, @corp/private-util@1.0.0,
// whose files the helper writes. makePrivateDepRepo makes a repository that depends on it.
// The egress bench (bench/egress.ts) starts it with options the tests do not use: an uplink (this
// host's real registry, whose packages it caches in its storage), anonymous reads, a storage
// directory of the caller's that outlives it, so a second start without the uplink serves what
// the first one cached, and JWT tokens, which cost it no bcrypt per request.
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { makeTestCertificate } from "./test-ca.js";

/** The package the registry holds, and what its one function returns for "x". */
export const PRIVATE_PACKAGE = {
  name: "@corp/private-util",
  version: "1.0.0",
  /** `require("@corp/private-util")("x")` returns this. */
  answer: "private-util says x",
} as const;

/** Where and how a registry starts. */
export interface PrivateRegistryOptions {
  /** The name its certificate is for and its URLs carry. @default "registry.test" */
  name?: string;
  /** Which of this test process's registries: its address is 127.217.<pid % 250>.<index + 1>. @default 0 */
  index?: number;
  /** Its port (this process runs as root, so 443 is free on an address of its own). @default 443 */
  port?: number;
  /**
   * A registry it fetches every other package from and caches in its storage (the bench's: this
   * host's real one). @default none: it serves only what was published to it
   */
  uplink?: string;
  /** Whether a request without a token may read packages (the bench's tunnelled arm). @default false */
  anonymousRead?: boolean;
  /**
   * Its storage: a directory of the caller's, kept when it closes, so a later start serves what it
   * holds (the private package is published only when it is not there yet). @default a directory of its own
   */
  storage?: string;
  /**
   * Tokens as JWTs, checked by their signature: a legacy token (the default) is checked against
   * htpasswd's bcrypt on every request, ~80 ms of verdaccio's CPU each on this machine, which the
   * bench would otherwise measure as the registry's and not the proxy's. @default false
   */
  jwt?: boolean;
}

/** A running private registry. */
export interface PrivateRegistry {
  /** Its base URL by name, with a trailing slash: `https://registry.test/` (the port when not 443). */
  url: string;
  /** The name its certificate is for ("registry.test"). */
  host: string;
  /** host, or host:port when the port is not 443: as URLs and .npmrc keys spell it. */
  authority: string;
  /** The loopback address it listens on (the proxy's test-only `resolve` maps `host` to it). */
  ip: string;
  port: number;
  /** The token of its one user (npm's `_authToken`; sent as `Authorization: Bearer <token>`). */
  token: string;
  /** The CA that signed its certificate, PEM (a credential's `ca`), and that PEM's file. */
  caPem: string;
  caFile: string;
  /** Milliseconds from spawning verdaccio to the package published. */
  startupMs: number;
  /** Verdaccio's process id (the bench reads its CPU time). */
  pid: number;
  /**
   * The environment for npm on this host: it resolves `host` to `ip` (a preloaded hook on Node's
   * dns.lookup, for npm's process only), trusts the CA, carries the token, and caches in a
   * directory of its own. A project's .npmrc still wins over it (npm's order).
   */
  npmEnv(): NodeJS.ProcessEnv;
  /** One request to it by address with the name as SNI and Host; the token when given. */
  request(path: string, opts?: RegistryRequestOptions): Promise<RegistryResponse>;
  /** Stops verdaccio and removes its directory. */
  close(): Promise<void>;
}

/** How PrivateRegistry.request asks. */
export interface RegistryRequestOptions {
  /** @default "GET" */
  method?: string;
  /** Sent as `Authorization: Bearer <token>`; none when undefined. */
  token?: string;
  /** A JSON body. */
  json?: unknown;
}

/** What PrivateRegistry.request got back. */
export interface RegistryResponse {
  status: number;
  body: Buffer;
}

const VERDACCIO = resolve(import.meta.dirname, "../../node_modules/verdaccio/bin/verdaccio");
const USER = { name: "ci-bot", password: "pw-private-registry-test" };

/** Starts a registry, registers its user, publishes @corp/private-util and resolves when all is served. */
export async function startPrivateRegistry(opts: PrivateRegistryOptions = {}): Promise<PrivateRegistry> {
  const [host, index, port] = [opts.name ?? "registry.test", opts.index ?? 0, opts.port ?? 443];
  const ip = `127.217.${process.pid % 250}.${index + 1}`;
  const authority = port === 443 ? host : `${host}:${port}`;
  const dir = mkdtempSync(join(tmpdir(), "pb-verdaccio-"));
  const started = Date.now();
  let stop = async () => {};
  try {
    const tls = makeTestCertificate(dir, [host], [ip]);
    writeFileSync(join(dir, "config.yaml"), config(dir, tls, ip, port, opts));
    const child = await spawnVerdaccio(dir, opts.uplink !== undefined);
    stop = child.stop;
    const reg: PrivateRegistry = {
      url: `https://${authority}/`,
      host,
      authority,
      ip,
      port,
      token: "",
      caPem: tls.caPem,
      caFile: tls.caFile,
      startupMs: 0,
      pid: child.pid,
      npmEnv: () => npmEnv(dir, reg),
      request: (path, o) => request(reg, path, o),
      close: async () => {
        await child.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
    const login = await reg.request(`/-/user/org.couchdb.user:${USER.name}`, { method: "PUT", json: USER });
    const token = login.status === 201 ? (JSON.parse(login.body.toString()) as { token?: unknown }).token : undefined;
    if (typeof token !== "string")
      throw new Error(`private registry: registering ${USER.name} answered ${login.status}: ${said(login)}`);
    reg.token = token;
    const held = opts.storage ? (await reg.request(META, { token })).status === 200 : false;
    if (!held) await publish(reg, dir);
    writeHostNpmConfig(dir, reg);
    reg.startupMs = Date.now() - started;
    return reg;
  } catch (e) {
    await stop();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

const META = `/${PRIVATE_PACKAGE.name.replace("/", "%2f")}`;

// Verdaccio's config: HTTPS on the address, htpasswd with one registration (the helper's), every
// package for logged-in users only (or anyone, with anonymousRead), no uplink unless given (the
// private package's scope never goes to it; what it fetches stays cached for a day), no web UI,
// warnings only on stdout as JSON lines.
function config(
  dir: string,
  tls: { certFile: string; keyFile: string },
  ip: string,
  port: number,
  opts: PrivateRegistryOptions,
): string {
  const access = opts.anonymousRead ? "$all" : "$authenticated";
  const scope = PRIVATE_PACKAGE.name.split("/")[0];
  const uplink = opts.uplink
    ? ["uplinks:", "  upstream:", `    url: ${opts.uplink}`, "    maxage: 24h", "    timeout: 60s", "    cache: true"]
    : [];
  return [
    `storage: ${opts.storage ?? join(dir, "storage")}`,
    ...(opts.jwt ? ["security:", "  api:", "    jwt:", "      sign:", "        expiresIn: 1d"] : []),
    "auth:",
    "  htpasswd:",
    `    file: ${join(dir, "htpasswd")}`,
    "    max_users: 1",
    ...uplink,
    "packages:",
    `  '${scope}/*':`,
    `    access: ${access}`,
    "    publish: $authenticated",
    "    unpublish: $authenticated",
    "  '**':",
    `    access: ${access}`,
    "    publish: $authenticated",
    "    unpublish: $authenticated",
    ...(opts.uplink ? ["    proxy: upstream"] : []),
    "https:",
    `  key: ${tls.keyFile}`,
    `  cert: ${tls.certFile}`,
    `listen: https://${ip}:${port}`,
    "web:",
    "  enable: false",
    "log: { type: stdout, format: json, level: warn }",
    "",
  ].join("\n");
}

// Runs verdaccio and resolves once its "http address" line says it listens, with its pid and a
// function that stops it. It rejects with verdaccio's last output if it exits or stays silent for
// a minute. With an uplink it trusts what this host's Node trusts (NODE_EXTRA_CA_CERTS: this
// machine's egress gateway re-signs TLS with a CA of its own).
async function spawnVerdaccio(dir: string, uplink: boolean): Promise<{ pid: number; stop: () => Promise<void> }> {
  const extra = process.env["NODE_EXTRA_CA_CERTS"];
  const child = spawn(process.execPath, [VERDACCIO, "--config", join(dir, "config.yaml")], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, ...(uplink && extra ? { NODE_EXTRA_CA_CERTS: extra } : {}) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  };
  let out = "";
  const collect = (d: Buffer) => (out = (out + d.toString()).slice(-4000));
  child.stderr.on("data", collect);
  try {
    await new Promise<void>((ready, fail) => {
      const timer = setTimeout(() => fail(new Error(`verdaccio did not listen within 60 s:\n${out}`)), 60_000);
      child.stdout.on("data", (d: Buffer) => {
        collect(d);
        if (!out.includes('"msg":"http address')) return;
        clearTimeout(timer);
        ready();
      });
      child.once("exit", (code) => (clearTimeout(timer), fail(new Error(`verdaccio exited (${code}):\n${out}`))));
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return { pid: child.pid!, stop };
}

function request(reg: PrivateRegistry, path: string, o: RegistryRequestOptions = {}): Promise<RegistryResponse> {
  const body = o.json === undefined ? undefined : Buffer.from(JSON.stringify(o.json));
  return new Promise((done, fail) => {
    const req = https.request(
      {
        host: reg.ip,
        port: reg.port,
        servername: reg.host,
        ca: reg.caPem,
        method: o.method ?? "GET",
        path,
        headers: {
          host: reg.authority,
          accept: "application/json",
          ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
          ...(body ? { "content-type": "application/json", "content-length": body.length } : {}),
        },
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => done({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on("error", fail);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`private registry: ${path} took over 30 s`)));
    req.on("error", fail);
    req.end(body);
  });
}

// Writes the package's files, packs them with tar as npm would (one "package/" folder) and
// publishes the tarball with npm's publish document (a PUT of the package's metadata with the
// tarball attached in base64).
async function publish(reg: PrivateRegistry, dir: string): Promise<void> {
  const { name, version } = PRIVATE_PACKAGE;
  const manifest = {
    name,
    version,
    description: "A package that exists on the test registry only.",
    main: "index.js",
    license: "MIT",
  };
  const src = join(dir, "fixture", "package");
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(
    join(src, "index.js"),
    `"use strict";\n// Says who answered, so a test can tell the package ran.\nmodule.exports = function privateUtil(x) {\n  return "private-util says " + x;\n};\n`,
  );
  const file = `${name.split("/")[1]}-${version}.tgz`;
  execFileSync("tar", [
    "-czf",
    join(dir, file),
    "--owner=0",
    "--group=0",
    "-C",
    join(dir, "fixture"),
    "package/package.json",
    "package/index.js",
  ]);
  const tgz = readFileSync(join(dir, file));
  const doc = {
    _id: name,
    name,
    "dist-tags": { latest: version },
    versions: {
      [version]: {
        ...manifest,
        _id: `${name}@${version}`,
        dist: {
          shasum: createHash("sha1").update(tgz).digest("hex"),
          integrity: `sha512-${createHash("sha512").update(tgz).digest("base64")}`,
          tarball: `${reg.url}${name}/-/${file}`,
        },
      },
    },
    _attachments: {
      [file]: { content_type: "application/octet-stream", data: tgz.toString("base64"), length: tgz.length },
    },
  };
  const r = await reg.request(`/${name.replace("/", "%2f")}`, { method: "PUT", token: reg.token, json: doc });
  if (r.status !== 201) throw new Error(`private registry: publishing ${name} answered ${r.status}: ${said(r)}`);
}

// The start of an answer's body, for an error message (bounded: verdaccio's errors are short).
const said = (r: RegistryResponse) => r.body.subarray(0, 300).toString();

// The host's npm configuration: a user .npmrc (registry, token, CA) and a preload that resolves
// the registry's name to its address in npm's process only (this host's DNS knows no such name).
function writeHostNpmConfig(dir: string, reg: PrivateRegistry): void {
  writeFileSync(
    join(dir, "npmrc"),
    `registry=${reg.url}\n//${reg.authority}/:_authToken=${reg.token}\ncafile=${reg.caFile}\n`,
  );
  writeFileSync(
    join(dir, "resolve-hook.cjs"),
    `"use strict";
// Preloaded into npm on the test host: ${reg.host} resolves to ${reg.ip}, other names as before.
const dns = require("node:dns");
const lookup = dns.lookup;
dns.lookup = function (hostname, options, callback) {
  if (typeof options === "function") [callback, options] = [options, {}];
  if (String(hostname).toLowerCase() !== ${JSON.stringify(reg.host)}) return lookup.call(this, hostname, options, callback);
  const all = typeof options === "object" && options !== null && options.all;
  if (all) process.nextTick(callback, null, [{ address: ${JSON.stringify(reg.ip)}, family: 4 }]);
  else process.nextTick(callback, null, ${JSON.stringify(reg.ip)}, 4);
};
`,
  );
}

function npmEnv(dir: string, reg: PrivateRegistry): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (/^npm_config_|^npm_package_|proxy$/i.test(k)) delete env[k];
  return {
    ...env,
    NODE_OPTIONS: `--require ${join(dir, "resolve-hook.cjs")}`,
    npm_config_userconfig: join(dir, "npmrc"),
    npm_config_cache: join(dir, "npm-cache"),
    npm_config_registry: reg.url,
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
  };
}

/** The repository makePrivateDepRepo made. */
export interface PrivateDepRepo {
  /** Its work tree (one commit on main), a temporary directory the caller removes. */
  dir: string;
  /** Its package-lock.json as committed. */
  lock: string;
}

/**
 * A repository (git init, one commit on main) whose package.json depends on @corp/private-util,
 * with a package-lock.json npm made against `reg` from this host, and an .npmrc that names the
 * registry by its host name with `_authToken=PATCHBAY_PLACEHOLDER`: the sandbox never has the
 * token, the egress proxy puts it in. Its `npm test` prints what the package answers.
 */
export function makePrivateDepRepo(reg: PrivateRegistry): PrivateDepRepo {
  const dir = mkdtempSync(join(tmpdir(), "pb-private-dep-"));
  const pkg = {
    name: "uses-private-util",
    version: "1.0.0",
    private: true,
    scripts: { test: "node index.js" },
    dependencies: { [PRIVATE_PACKAGE.name]: PRIVATE_PACKAGE.version },
  };
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
  writeFileSync(join(dir, "index.js"), `console.log(require(${JSON.stringify(PRIVATE_PACKAGE.name)})("x"));\n`);
  writeFileSync(join(dir, ".gitignore"), "node_modules/\n");
  // The lockfile first, with the host's token: the repo's own .npmrc (written next) would win over it.
  execFileSync("npm", ["install", "--package-lock-only", "--ignore-scripts"], {
    cwd: dir,
    env: reg.npmEnv(),
    stdio: ["ignore", "ignore", "pipe"],
  });
  const lock = readFileSync(join(dir, "package-lock.json"), "utf8");
  const resolved = (JSON.parse(lock) as { packages: Record<string, { resolved?: string }> }).packages[
    `node_modules/${PRIVATE_PACKAGE.name}`
  ]?.resolved;
  if (!resolved?.startsWith(reg.url))
    throw new Error(`private dep repo: the lockfile resolves ${PRIVATE_PACKAGE.name} to ${resolved}, not ${reg.url}`);
  writeFileSync(join(dir, ".npmrc"), `registry=${reg.url}\n//${reg.authority}/:_authToken=PATCHBAY_PLACEHOLDER\n`);
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: dir, stdio: "ignore" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-qm", "depend on @corp/private-util");
  return { dir, lock };
}
