// The memory backend's commands (backend/memory.ts): FOR SIMULATIONS ONLY. It isolates nothing and
// executes nothing: a box's files are a Map in this process, and each command patchbay itself
// sends to a box (the repo's tar in and the snapshot's tar out, the git scripts of the baseline,
// the patch and the checkpoints, the verify apply) is answered here from that Map, with the
// output its parser expects. The agent's own commands and verify go to a toy interpreter (cd, echo,
// ls, cat, pwd, true, false, exit; anything else succeeds and prints nothing): enough for a
// scripted model, never a shell. What it costs is what it measures: the worker, Redis and the
// model server, with the sandbox's share at about nothing.
import { count } from "../core/count.js";
import { createHash } from "node:crypto";

export type Files = Map<string, Buffer>;
export interface Ran {
  out: Buffer;
  err: string;
  code: number;
}

/** A box's state: its files by absolute path, the directories made, the trees hashed (baseline, patch). */
export interface SimBox {
  files: Files;
  dirs: Set<string>;
  trees: Map<string, Files>;
}

const WS = "/workspace";
const ok = (out: Buffer | string = "", code = 0, err = ""): Ran => ({ out: Buffer.from(out), err, code });
const norm = (dir: string, name: string) => {
  const parts: string[] = [];
  for (const p of (name.startsWith("/") ? name : `${dir}/${name}`).split("/")) {
    if (p === "..") parts.pop();
    else if (p && p !== ".") parts.push(p);
  }
  return `/${parts.join("/")}`;
};

/** The files under /workspace, relative, as a tree (a copy). */
function snapshot(box: SimBox): Files {
  const t: Files = new Map();
  for (const [p, b] of box.files)
    if (p.startsWith(`${WS}/`) && !p.startsWith(`${WS}/.git/`)) t.set(p.slice(WS.length + 1), b);
  return t;
}

/** A tree's id: a sha1 over its sorted names and contents (40 hex, as git's). */
function treeId(box: SimBox, t: Files): string {
  const h = createHash("sha1");
  for (const name of [...t.keys()].sort())
    h.update(`${name}\0`).update(createHash("sha1").update(t.get(name)!).digest());
  const id = h.digest("hex");
  box.trees.set(id, t);
  return id;
}

/** Runs argv as the box would (see the header): the command's stdout, stderr and exit status. */
export function simRun(box: SimBox, argv: string[], stdin: Buffer, cwd = WS): Ran {
  let a = argv;
  if (a[0] === "timeout") a = a.slice(3);
  const c = a.indexOf("-c");
  const script = c >= 0 ? (a[c + 1] ?? "") : "";
  const args = c >= 0 ? a.slice(c + 3) : []; // after $0
  if (a[0] === "tar")
    return a.includes("-x")
      ? untar(box, a[a.indexOf("-C") + 1] ?? WS, stdin)
      : ok(tarOf(box, a[a.indexOf("-C") + 1] ?? WS));
  if (script.startsWith("# verify_apply.py") || script.includes("# apply-checkpoint.sh:"))
    return applyPatch(box, stdin.toString("utf8"));
  if (script.startsWith("# tools-probe.sh")) return ok();
  if (script.includes("\n# baseline.sh:")) return ok(`${treeId(box, snapshot(box))}\n`);
  if (script.includes("\n# patch.sh:")) return patchOut(box, args[0] ?? "");
  if (script.includes("\n# checkpoint.sh:") || script.includes("\n# rediff.sh:")) {
    const final = snapshot(box);
    const id = treeId(box, final);
    const diff = diffTrees(box.trees.get(args[0] ?? "") ?? new Map<string, Buffer>(), final).patch;
    return ok(script.includes("# rediff.sh") ? diff : `${id}\n${diff}`);
  }
  if (script.startsWith("# vars.sh")) return ok(); // the store made (prepareStore), the deferred steps
  if (c >= 0) return interpret(box, script.replace(/^exec 2>&1 <\/dev\/null\n/, ""), cwd);
  return ok("", 127, `${a[0] ?? ""}: not available in the memory backend (simulations only)\n`);
}

function patchOut(box: SimBox, base: string): Ran {
  const baseline = box.trees.get(base);
  if (!baseline) return ok("", 128, `fatal: not a tree ${base}\n`);
  const final = snapshot(box);
  const id = treeId(box, final);
  const { names, stat, patch } = diffTrees(baseline, final);
  const n = Buffer.from(names.map((f) => `${f}\0`).join(""));
  return ok(
    Buffer.concat([
      Buffer.from(`${id} ${n.length} ${Buffer.byteLength(stat)} ${Buffer.byteLength(patch)}\n`),
      n,
      Buffer.from(stat),
      Buffer.from(patch),
    ]),
  );
}

const lines = (b: Buffer | undefined) => {
  if (!b || !b.length) return { ls: [] as string[], nl: true };
  const s = b.toString("utf8");
  return { ls: s.replace(/\n$/, "").split("\n"), nl: s.endsWith("\n") };
};

/** Whole-file hunks: valid unified diffs, and all the memory apply needs. */
export function diffTrees(from: Files, to: Files): { names: string[]; stat: string; patch: string } {
  const names = [...new Set([...from.keys(), ...to.keys()])]
    .sort()
    .filter((f) => !from.get(f)?.equals(to.get(f) ?? Buffer.alloc(0)) || from.has(f) !== to.has(f));
  let patch = "";
  let stat = "";
  for (const f of names) {
    const a = lines(from.get(f));
    const b = lines(to.get(f));
    const head = !from.has(f)
      ? `new file mode 100644\n--- /dev/null\n+++ b/${f}\n`
      : !to.has(f)
        ? `deleted file mode 100644\n--- a/${f}\n+++ /dev/null\n`
        : `--- a/${f}\n+++ b/${f}\n`;
    const side = (ls: string[], nl: boolean, sign: string) =>
      ls.map((l) => `${sign}${l}\n`).join("") + (ls.length && !nl ? "\\ No newline at end of file\n" : "");
    patch += `diff --git a/${f} b/${f}\n${head}@@ -${a.ls.length ? 1 : 0},${a.ls.length} +${b.ls.length ? 1 : 0},${b.ls.length} @@\n${side(a.ls, a.nl, "-")}${side(b.ls, b.nl, "+")}`;
    stat += ` ${f} | ${a.ls.length + b.ls.length}\n`;
  }
  if (names.length) stat += ` ${count(names.length, "file")} changed\n`;
  return { names, stat, patch };
}

/** Applies a diffTrees patch to /workspace: each file's content is its `+` lines. */
function applyPatch(box: SimBox, patch: string): Ran {
  for (const section of patch.split(/^(?=diff --git )/m).filter((s) => s.startsWith("diff --git "))) {
    const path = /^\+\+\+ b\/(.*)$/m.exec(section)?.[1] ?? /^--- a\/(.*)$/m.exec(section)?.[1];
    if (!path) return ok("", 1, "error: unrecognized patch\n");
    if (/^\+\+\+ \/dev\/null$/m.test(section)) {
      box.files.delete(`${WS}/${path}`);
      continue;
    }
    const body = section
      .slice(section.indexOf("\n@@") + 1)
      .split("\n")
      .slice(1);
    const added = body.filter((l, i) => l.startsWith("+") || (l.startsWith("\\") && body[i - 1]?.startsWith("+")));
    const text = added.map((l) => (l.startsWith("\\") ? "" : `${l.slice(1)}\n`)).join("");
    box.files.set(`${WS}/${path}`, Buffer.from(added.at(-1)?.startsWith("\\") ? text.slice(0, -1) : text));
  }
  return ok();
}

/** A toy of a shell for the agent's commands and verify (see the header). */
export function interpret(box: SimBox, command: string, cwd = WS): Ran {
  let out = "";
  let code = 0;
  for (const part of command.split(/&&|;|\n/)) {
    const words =
      (part.split("|")[0] ?? "")
        .trim()
        .match(/'[^']*'|"[^"]*"|\S+/g)
        ?.map((w) => w.replace(/^(['"])(.*)\1$/, "$2")) ?? [];
    const [cmd, ...rest] = words.filter((w) => !/^\d?>|^<|^2>&1$/.test(w));
    if (!cmd) continue;
    const path = norm(cwd, rest[0] ?? ".");
    if (cmd === "cd") cwd = path;
    else if (cmd === "echo") out += `${rest.join(" ")}\n`;
    else if (cmd === "pwd") out += `${cwd}\n`;
    else if (cmd === "cat") out += box.files.get(path)?.toString("utf8") ?? "";
    else if (cmd === "ls")
      out += [
        ...new Set(
          [...box.files.keys(), ...box.dirs]
            .filter((p) => p.startsWith(`${path}/`))
            .map((p) => p.slice(path.length + 1).split("/")[0]),
        ),
      ]
        .sort()
        .map((n) => `${n}\n`)
        .join("");
    else if (cmd === "false") code = 1;
    else if (cmd === "exit") return ok(out, Number(rest[0] ?? 0) || 0);
    else code = 0;
    if (code !== 0) break;
  }
  return ok(out, code);
}

/** The repo's tar into `dir`: ustar, with GNU long names and pax paths. */
function untar(box: SimBox, dir: string, tar: Buffer): Ran {
  let long: string | undefined;
  for (let at = 0; at + 512 <= tar.length;) {
    const h = tar.subarray(at, at + 512);
    if (h.every((x) => x === 0)) break;
    const str = (s: number, n: number) =>
      h
        .subarray(s, s + n)
        .toString("utf8")
        .replace(/\0.*$/s, "");
    const size = parseInt(str(124, 12).trim() || "0", 8);
    const type = String.fromCharCode(h[156]!);
    const data = tar.subarray(at + 512, at + 512 + size);
    at += 512 + Math.ceil(size / 512) * 512;
    const prefix = str(345, 155);
    const name = long ?? (prefix ? `${prefix}/${str(0, 100)}` : str(0, 100));
    long = undefined;
    if (type === "L") long = data.toString("utf8").replace(/\0.*$/s, "");
    else if (type === "x") long = /\d+ path=([^\n]*)\n/.exec(data.toString("utf8"))?.[1];
    else if (type === "5") box.dirs.add(norm(dir, name));
    else if (type === "0" || type === "\0" || type === "7") box.files.set(norm(dir, name), Buffer.from(data));
  }
  return ok();
}

/** A ustar of `dir` (names over 100 bytes as GNU long names). */
function tarOf(box: SimBox, dir: string): Buffer {
  const parts: Buffer[] = [];
  const header = (name: string, size: number, type: string) => {
    const h = Buffer.alloc(512);
    h.write(name.slice(0, 99), 0);
    h.write("0000644\0", 100);
    h.write("0001750\0", 108);
    h.write("0001750\0", 116);
    h.write(`${size.toString(8).padStart(11, "0")}\0`, 124);
    h.write(
      `${Math.floor(Date.now() / 1000)
        .toString(8)
        .padStart(11, "0")}\0`,
      136,
    );
    h.write(type, 156);
    h.write("ustar\x0000", 257);
    h.fill(" ", 148, 156);
    h.write(
      `${h
        .reduce((s, x) => s + x, 0)
        .toString(8)
        .padStart(6, "0")}\0 `,
      148,
    );
    return h;
  };
  const pad = (b: Buffer) => Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)]);
  for (const [p, data] of box.files) {
    if (!p.startsWith(`${dir}/`)) continue;
    const name = `./${p.slice(dir.length + 1)}`;
    if (Buffer.byteLength(name) > 99)
      parts.push(header("././@LongLink", Buffer.byteLength(name) + 1, "L"), pad(Buffer.from(`${name}\0`)));
    parts.push(header(name, data.length, "0"), pad(data));
  }
  return Buffer.concat([...parts, Buffer.alloc(1024)]);
}
