// The patch must be the bytes on disk, whatever the repo's .git says: a repo-supplied clean filter
// and a planted loose object each forged the patch when it was computed with the workspace's git.
//
// Backend: Docker (the attacks need the isolation and the limits); under rootless Podman too.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { deflateSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { computePatch } from "../../../src/job/patch.js";
import { loadRepo } from "../../../src/job/repo/load.js";
import { Sandbox } from "../../../src/sandbox/sandbox.js";

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-patch-hostile-"));
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));
let n = 0;

const GIT_ID = [
  "-c",
  "user.name=t",
  "-c",
  "user.email=t@t",
  "-c",
  "init.defaultBranch=main",
  "-c",
  "commit.gpgSign=false",
];
const git = (cwd: string, ...args: string[]) => execFileSync("git", [...GIT_ID, ...args], { cwd, encoding: "utf8" });

/** A committed host repo with a.py, plus whatever `tamper` does to it afterwards. */
function repo(tamper: (dir: string) => void = () => {}): string {
  const dir = path.join(tmpRoot, `r${n++}`);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "a.py"), "print(1)\n");
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "first");
  tamper(dir);
  return dir;
}

/** The repo as a .tar.gz (the archive source). */
function archive(dir: string): string {
  const file = path.join(tmpRoot, `a${n++}.tar.gz`);
  execFileSync("tar", ["-czf", file, "-C", dir, "."]);
  return file;
}

/** Applies the patch to a pristine copy of `dir` and returns a.py there. */
function applied(dir: string, patch: string): string {
  const copy = path.join(tmpRoot, `c${n++}`);
  fs.cpSync(dir, copy, { recursive: true });
  fs.rmSync(path.join(copy, ".git"), { recursive: true, force: true });
  fs.writeFileSync(path.join(tmpRoot, "p.diff"), patch);
  execFileSync("git", ["apply", "--unsafe-paths", path.join(tmpRoot, "p.diff")], { cwd: copy });
  return fs.readFileSync(path.join(copy, "a.py"), "utf8");
}

async function withSandbox<T>(fn: (sb: Sandbox) => Promise<T>): Promise<T> {
  const sb = await Sandbox.create({ labels: { "patchbay.test": "patch-hostile" } });
  try {
    return await fn(sb);
  } finally {
    await sb.destroy();
  }
}

const HONEST = "print(2)\n";

describe("the patch is the bytes on disk (real engine)", () => {
  it("ignores a clean filter from the repo's .git/config and .git/info/attributes", async () => {
    // The filter passes the original through untouched, so the baseline looks clean, and adds a
    // line to anything edited.
    const dir = repo((d) => {
      fs.writeFileSync(
        path.join(d, ".git/bd.sh"),
        `c=$(cat); printf '%s\\n' "$c"; case "$c" in *"print(1)"*) ;; *) echo 'import os; os.system("BACKDOOR")';; esac\n`,
      );
      fs.appendFileSync(path.join(d, ".git/config"), '[filter "bd"]\n\tclean = sh .git/bd.sh\n');
      fs.mkdirSync(path.join(d, ".git/info"), { recursive: true });
      fs.writeFileSync(path.join(d, ".git/info/attributes"), "*.py filter=bd\n");
    });
    await withSandbox(async (sb) => {
      const { baseline } = await loadRepo(sb, { archive: archive(dir) });
      await sb.files.write("/workspace/a.py", Buffer.from(HONEST));
      const p = await computePatch(sb, baseline);
      expect(p.patch).not.toMatch(/BACKDOOR/);
      expect(p.filesChanged).toEqual(["a.py"]);
      expect(applied(dir, p.patch)).toBe((await sb.files.read("/workspace/a.py")).toString());
    });
  });

  it("ignores .gitattributes that would rewrite content (text/eol) or run a filter", async () => {
    const dir = repo((d) => {
      fs.writeFileSync(path.join(d, ".gitattributes"), "*.py text eol=lf filter=bd ident\n");
      fs.appendFileSync(path.join(d, ".git/config"), '[filter "bd"]\n\tclean = sed s/2/666/\n');
      git(d, "add", ".gitattributes");
      git(d, "commit", "-qm", "attrs");
    });
    await withSandbox(async (sb) => {
      const { baseline } = await loadRepo(sb, { path: dir });
      const crlf = "print(2)\r\n# $Id$\r\n";
      await sb.files.write("/workspace/a.py", Buffer.from(crlf));
      const p = await computePatch(sb, baseline);
      expect(p.patch).not.toMatch(/666/);
      const copy = path.join(tmpRoot, `c${n++}`);
      fs.cpSync(dir, copy, { recursive: true });
      fs.rmSync(path.join(copy, ".git"), { recursive: true });
      fs.rmSync(path.join(copy, ".gitattributes"));
      fs.writeFileSync(path.join(tmpRoot, "q.diff"), p.patch);
      execFileSync("git", ["apply", path.join(tmpRoot, "q.diff")], { cwd: copy });
      expect(fs.readFileSync(path.join(copy, "a.py"), "utf8")).toBe(crlf);
    });
  });

  it("ignores a loose object planted under the hash of the honest content", async () => {
    const dir = repo();
    await withSandbox(async (sb) => {
      const { baseline } = await loadRepo(sb, { path: dir });
      // What git would store for the honest edit, planted with other content under its name.
      const id = createHash("sha1")
        .update(`blob ${Buffer.byteLength(HONEST)}\0${HONEST}`)
        .digest("hex");
      const evil = 'import os; os.system("BACKDOOR")\n';
      await sb.files.mkdirp(`/workspace/.git/objects/${id.slice(0, 2)}`);
      await sb.files.write(
        `/workspace/.git/objects/${id.slice(0, 2)}/${id.slice(2)}`,
        deflateSync(Buffer.from(`blob ${Buffer.byteLength(evil)}\0${evil}`)),
      );
      await sb.files.write("/workspace/a.py", Buffer.from(HONEST));
      const p = await computePatch(sb, baseline);
      expect(p.patch).not.toMatch(/BACKDOOR/);
      expect(applied(dir, p.patch)).toBe(HONEST);
    });
  });

  it("keeps the store out of the agent's reach", async () => {
    const dir = repo();
    await withSandbox(async (sb) => {
      await loadRepo(sb, { path: dir });
      const r = await sb.shell.run("ls /patchbay; echo x > /patchbay/planted; echo rc=$?");
      expect(r.output).toMatch(/Permission denied/);
      expect(r.output).toMatch(/rc=1/);
    });
  });
});
