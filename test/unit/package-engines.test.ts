// The Node versions patchbay claims (package.json's engines) are true of what a default install
// pulls: every package the lock installs for production (optional peers are dev-only there) admits
// the first release of every Node major the claim admits, so `npm i patchbay` prints no EBADENGINE
// on any of them. The same range is what README.md and docs/operations.md tell a user.
// The install itself, counted and checked for the warning: test/e2e/package.test.ts.
import { readFileSync } from "node:fs";
import semver from "semver";
import { describe, expect, it } from "vitest";

const read = (p: string) => readFileSync(new URL(`../../${p}`, import.meta.url), "utf8");
const pkg = JSON.parse(read("package.json")) as { engines: { node: string } };
const lock = JSON.parse(read("package-lock.json")) as {
  packages: Record<string, { version?: string; dev?: boolean; engines?: { node?: string } | string[] }>;
};

/** The lowest version of each Node major (up to `last`) the range admits: 20.19.0, 22.12.0, 23.0.0, … */
export function majorMinimums(range: string, last = 30): string[] {
  const r = new semver.Range(range);
  const out: string[] = [];
  for (let major = 0; major <= last; major++) {
    const mins = r.set
      .map((set) => set.map((c) => c.value).join(" ") || "*")
      .map((set) => semver.minVersion(`${set} >=${major}.0.0 <${major + 1}.0.0-0`))
      .filter((v): v is semver.SemVer => v !== null && v.major === major && r.test(v));
    if (mins.length) out.push(mins.map((v) => v.version).sort(semver.compare)[0]!);
  }
  return out;
}

describe("patchbay's Node range", () => {
  const claim = pkg.engines.node;
  const minimums = majorMinimums(claim);

  it("reads as the lowest release of each major it admits", () => {
    expect(majorMinimums("^20.19.0 || >=22.12.0", 24)).toEqual(["20.19.0", "22.12.0", "23.0.0", "24.0.0"]);
    expect(minimums.slice(0, 2)).toEqual(["20.19.0", "22.12.0"]);
  });

  it("is admitted by every package a production install pulls, at the lowest release of each major", () => {
    const refused: string[] = [];
    for (const [path, p] of Object.entries(lock.packages)) {
      if (path === "" || p.dev) continue;
      // An old array form of engines is advisory only, and says nothing of Node: npm ignores it.
      const wants = Array.isArray(p.engines) ? undefined : p.engines?.node;
      if (wants === undefined) continue;
      for (const node of minimums)
        if (!semver.satisfies(node, wants)) refused.push(`${path}@${p.version} wants node ${wants}, not ${node}`);
    }
    expect(refused).toEqual([]);
  });

  it("is the range README.md and docs/operations.md give", () => {
    const shown = `Node ${claim.replace(/ \|\| /g, " or ")}`;
    expect(read("README.md")).toContain(shown);
    expect(read("docs/operations.md")).toContain(shown);
  });
});
