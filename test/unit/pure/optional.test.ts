// The loader of optional packages (src/core/optional.ts): a feature used without its package
// installed fails with an error naming the feature and the exact `npm i` that adds it; any other
// failure passes through untouched. Its table agrees with package.json's optional peers. Each real
// site without its packages installed: test/e2e/package.test.ts, in a consumer's default install.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadOptional, MissingPackageError, OPTIONAL, type OptionalFeature } from "../../../src/core/optional.js";
import { kindOf } from "../../../src/core/errors.js";

const FEATURE: OptionalFeature = {
  name: "the test feature",
  packages: ["@patchbay-test/not-installed", "patchbay-test-not-installed-either"],
};
// A variable, so TypeScript does not resolve it: neither package exists anywhere.
const importOf = (specifier: string) => () => import(specifier) as Promise<unknown>;

describe("loadOptional", () => {
  it("names the feature, the missing package and the npm command for all the feature's packages", async () => {
    for (const specifier of ["@patchbay-test/not-installed", "@patchbay-test/not-installed/sub/path.js"]) {
      const err = await loadOptional(FEATURE, importOf(specifier)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MissingPackageError);
      expect(kindOf(err)).toBe("config");
      expect((err as Error).message).toBe(
        "the test feature needs the package @patchbay-test/not-installed, which is not installed (it is optional: " +
          "a default install leaves it out). Install what it needs with: " +
          "npm i @patchbay-test/not-installed patchbay-test-not-installed-either",
      );
      expect((err as Error).cause).toMatchObject({ code: "ERR_MODULE_NOT_FOUND" });
    }
    const second = await loadOptional(FEATURE, importOf("patchbay-test-not-installed-either")).catch((e: unknown) => e);
    expect((second as Error).message).toMatch(/needs the package patchbay-test-not-installed-either, /);
  });

  it("passes any other failure through: a package that is not the feature's, a broken module, a bug", async () => {
    const other = await loadOptional(FEATURE, importOf("patchbay-test-someone-elses")).catch((e: unknown) => e);
    expect(other).not.toBeInstanceOf(MissingPackageError);
    expect(other).toMatchObject({ code: "ERR_MODULE_NOT_FOUND" });
    const bug = new TypeError("x is not a function");
    await expect(loadOptional(FEATURE, () => Promise.reject(bug))).rejects.toBe(bug);
  });

  it("gives what the loader gives when the packages are there", async () => {
    await expect(loadOptional(FEATURE, () => Promise.resolve(42))).resolves.toBe(42);
    const m = await loadOptional(OPTIONAL.dashboard, () => import("fastify"));
    expect(typeof m.default).toBe("function");
  });
});

describe("the optional features", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
    peerDependenciesMeta: Record<string, { optional?: boolean }>;
  };
  const listed = Object.values(OPTIONAL).flatMap((f) => [...f.packages]);

  it("are exactly package.json's optional peers, each kept as a dev dependency for the repo's own tests", () => {
    expect([...listed].sort()).toEqual(Object.keys(pkg.peerDependencies).sort());
    for (const name of listed) {
      expect(pkg.peerDependenciesMeta[name], name).toEqual({ optional: true });
      expect(pkg.devDependencies[name], name).toBe(pkg.peerDependencies[name]);
      expect(pkg.dependencies[name], name).toBeUndefined();
    }
  });

  it("each has its npm command in docs/operations.md's install table", () => {
    const ops = readFileSync(new URL("../../../docs/operations.md", import.meta.url), "utf8");
    for (const f of Object.values(OPTIONAL)) expect(ops, f.name).toContain(`npm i ${f.packages.join(" ")}`);
  });
});
