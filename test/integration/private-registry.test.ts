// Guards the private npm registry the egress-credential tests install from (test/support/verdaccio.ts):
// a real verdaccio over HTTPS that serves its package to the token only (anonymous reads are
// refused), whose package and tarball are the ones published, that npm on this host reads with
// the token and the CA, and whose dependent repository (makePrivateDepRepo) has a lockfile that
// resolves by the registry's name and an .npmrc with the placeholder, never the token. The egress
// bench's options: anonymous reads, JWT tokens, and a storage of the caller's that a second start
// serves again (the uplink is the bench's own run: bench/egress.ts checks its lockfile).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  makePrivateDepRepo,
  PRIVATE_PACKAGE,
  startPrivateRegistry,
  type PrivateRegistry,
} from "../support/verdaccio.js";

let reg: PrivateRegistry;
beforeAll(async () => {
  reg = await startPrivateRegistry();
  console.log(`private registry ready in ${reg.startupMs} ms`);
});
afterAll(async () => {
  await reg?.close();
});

const META = `/${PRIVATE_PACKAGE.name.replace("/", "%2f")}`;

describe("the private registry", () => {
  it("refuses an anonymous read and a wrong token, and serves the package and its tarball to the token", async () => {
    expect([401, 403]).toContain((await reg.request(META)).status);
    expect([401, 403]).toContain((await reg.request(META, { token: "not-the-token" })).status);

    const meta = await reg.request(META, { token: reg.token });
    expect(meta.status).toBe(200);
    const doc = JSON.parse(meta.body.toString()) as {
      "dist-tags": { latest: string };
      versions: Record<string, { license: string; dist: { tarball: string; integrity: string } }>;
    };
    expect(doc["dist-tags"].latest).toBe(PRIVATE_PACKAGE.version);
    const v = doc.versions[PRIVATE_PACKAGE.version]!;
    expect(v.license).toBe("MIT");
    // The tarball's URL names the registry as the request did (by name), not its address.
    const tarball = new URL(v.dist.tarball);
    expect(tarball.host).toBe(reg.authority);

    expect([401, 403]).toContain((await reg.request(tarball.pathname)).status);
    const tgz = await reg.request(tarball.pathname, { token: reg.token });
    expect(tgz.status).toBe(200);
    expect(`sha512-${createHash("sha512").update(tgz.body).digest("base64")}`).toBe(v.dist.integrity);
    const files = execFileSync("tar", ["-tz"], { input: tgz.body, encoding: "utf8" }).trim().split("\n").sort();
    expect(files).toEqual(["package/index.js", "package/package.json"]);
  });

  it("admits no registration after its own", async () => {
    const r = await reg.request("/-/user/org.couchdb.user:intruder", {
      method: "PUT",
      json: { name: "intruder", password: "pw-intruder-1234" },
    });
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect([401, 403]).toContain((await reg.request(META, { token: "" })).status);
  });

  it("serves npm on this host with the token and the CA, by its name; without the token npm is refused", () => {
    const env = reg.npmEnv();
    expect(execFileSync("npm", ["view", PRIVATE_PACKAGE.name, "version"], { env, encoding: "utf8" }).trim()).toBe(
      PRIVATE_PACKAGE.version,
    );
    const anonymous = (() => {
      try {
        execFileSync("npm", ["view", PRIVATE_PACKAGE.name, "version", `--//${reg.authority}/:_authToken=`], {
          env,
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
        });
        return "served";
      } catch (e) {
        return String((e as { stderr?: string }).stderr);
      }
    })();
    expect(anonymous).toMatch(/E401|E403|401|403/);
  });
});

describe("makePrivateDepRepo", () => {
  it("commits a lockfile resolved by the registry's name and an .npmrc with the placeholder only, which installs", () => {
    const repo = makePrivateDepRepo(reg);
    try {
      const lock = JSON.parse(readFileSync(join(repo.dir, "package-lock.json"), "utf8")) as {
        packages: Record<string, { version?: string; resolved?: string; integrity?: string }>;
      };
      const entry = lock.packages[`node_modules/${PRIVATE_PACKAGE.name}`]!;
      expect(entry.version).toBe(PRIVATE_PACKAGE.version);
      expect(entry.resolved).toBe(`${reg.url}${PRIVATE_PACKAGE.name}/-/private-util-${PRIVATE_PACKAGE.version}.tgz`);
      expect(entry.integrity).toMatch(/^sha512-/);
      const npmrc = readFileSync(join(repo.dir, ".npmrc"), "utf8");
      expect(npmrc).toBe(`registry=${reg.url}\n//${reg.authority}/:_authToken=PATCHBAY_PLACEHOLDER\n`);
      // Nothing committed carries the token or the address.
      const tracked = execFileSync("git", ["ls-files"], { cwd: repo.dir, encoding: "utf8" }).trim().split("\n").sort();
      expect(tracked).toEqual([".gitignore", ".npmrc", "index.js", "package-lock.json", "package.json"]);
      for (const f of tracked) {
        const text = readFileSync(join(repo.dir, f), "utf8");
        expect(text).not.toContain(reg.token);
        expect(text).not.toContain(reg.ip);
      }
      expect(execFileSync("git", ["status", "--porcelain"], { cwd: repo.dir, encoding: "utf8" })).toBe("");
      // With the token put in (as the proxy will), npm ci installs it and the package runs.
      const token = `--//${reg.authority}/:_authToken=${reg.token}`;
      execFileSync("npm", ["ci", "--ignore-scripts", token], { cwd: repo.dir, env: reg.npmEnv(), stdio: "ignore" });
      expect(execFileSync("node", ["index.js"], { cwd: repo.dir, encoding: "utf8" }).trim()).toBe(
        PRIVATE_PACKAGE.answer,
      );
    } finally {
      rmSync(repo.dir, { recursive: true, force: true });
    }
  });
});

describe("the bench's options", () => {
  it("serves anonymous reads, issues a JWT, and keeps its storage for a second start that serves it again", async () => {
    const storage = mkdtempSync(join(tmpdir(), "pb-verdaccio-storage-"));
    let open: PrivateRegistry | undefined;
    try {
      open = await startPrivateRegistry({ index: 1, storage, anonymousRead: true, jwt: true });
      expect(open.token.split(".")).toHaveLength(3); // header.payload.signature
      expect((await open.request(META)).status).toBe(200);
      expect((await open.request(META, { token: open.token })).status).toBe(200);
      await open.close();
      open = undefined;
      expect(existsSync(storage)).toBe(true);
      // The second start finds the package in the storage and does not publish it again.
      open = await startPrivateRegistry({ index: 1, storage, anonymousRead: true, jwt: true });
      const doc = JSON.parse((await open.request(META)).body.toString()) as { versions: Record<string, unknown> };
      expect(Object.keys(doc.versions)).toEqual([PRIVATE_PACKAGE.version]);
    } finally {
      await open?.close();
      rmSync(storage, { recursive: true, force: true });
    }
  });
});
