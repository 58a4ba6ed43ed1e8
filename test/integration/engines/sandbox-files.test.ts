// Container files, byte-exact, against a real container, and always with the agent's permissions.
//
// Backend: Docker (the hardened container and its image).
import { createHash } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import type { FileAgent } from "../../../src/sandbox/file-agent.js";
import { Files } from "../../../src/sandbox/files.js";
import type { Sandbox } from "../../../src/sandbox/sandbox.js";
import { Toolbox } from "../../../src/tools/index.js";
import { useSandbox } from "../../support/sandbox.js";

// Both lanes: the in-container file agent (the default) and a `docker exec` as uid 1000 (the
// fallback where the agent cannot run: an image without python3, an agent that cannot restart).
describe.each([
  ["file agent", (s: Sandbox) => s.files],
  ["docker exec", (s: Sandbox) => new Files(s.box)],
])("sandbox.files via %s (real engine)", (_lane, filesOf) => {
  const box = useSandbox();
  const sb = () => ({ files: filesOf(box()), shell: box().shell });

  const roundTrip = async (name: string, bytes: Buffer) => {
    await sb().files.write(`/workspace/${name}`, bytes);
    expect(Buffer.compare(await sb().files.read(`/workspace/${name}`), bytes)).toBe(0);
    // ...and what the container sees is the same bytes.
    const sum = await sb().shell.run(`sha256sum /workspace/${name} | cut -d' ' -f1`);
    const { createHash } = await import("node:crypto");
    expect(sum.output.trim()).toBe(createHash("sha256").update(bytes).digest("hex"));
  };

  it("round-trips every byte value", () =>
    roundTrip("all.bin", Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256))));
  it("round-trips CRLF", () => roundTrip("crlf.txt", Buffer.from("a\r\nb\r\n\r\nc\r\n")));
  it("round-trips a file without final newline", () => roundTrip("nofinal.txt", Buffer.from("no newline at the end")));
  it("round-trips an empty file", () => roundTrip("empty.txt", Buffer.alloc(0)));
  it("round-trips a 5 MB file", () =>
    roundTrip("big.bin", Buffer.from(Array.from({ length: 5 * 1024 * 1024 }, (_, i) => (i * 7919) % 251))));

  it("new files belong to uid 1000 with mode 0644", async () => {
    await sb().files.write("/workspace/new.txt", Buffer.from("x"));
    const r = await sb().shell.run("stat -c '%u:%g %a' /workspace/new.txt");
    expect(r.output).toBe("1000:1000 644\n");
  });

  it("keeps mode 0755 (and the owner) on overwrite", async () => {
    await sb().shell.run("printf '#!/bin/sh\\necho v1\\n' > /workspace/run.sh && chmod 0755 /workspace/run.sh");
    await sb().files.write("/workspace/run.sh", Buffer.from("#!/bin/sh\necho v2\n"));
    const r = await sb().shell.run("stat -c '%u:%g %a' /workspace/run.sh; /workspace/run.sh");
    expect(r.output).toBe("1000:1000 755\nv2\n");
    expect((await sb().files.stat("/workspace/run.sh"))?.mode).toBe(0o755);
  });

  it("writes with an explicit mode", async () => {
    await sb().files.write("/workspace/x.sh", Buffer.from("echo hi"), { mode: 0o700 });
    expect((await sb().shell.run("stat -c %a /workspace/x.sh")).output).toBe("700\n");
  });

  it("follows a symlink within the container and says so", async () => {
    await sb().shell.run(
      "mkdir -p /workspace/real && echo target > /workspace/real/t.txt && ln -sf real/t.txt /workspace/link.txt",
    );
    const st = await sb().files.stat("/workspace/link.txt");
    expect(st).toMatchObject({ type: "file", path: "/workspace/real/t.txt", symlinkTarget: "/workspace/real/t.txt" });
    expect((await sb().files.read("/workspace/link.txt")).toString()).toBe("target\n");
    await sb().files.write("/workspace/link.txt", Buffer.from("through\n"));
    const r = await sb().shell.run("cat /workspace/real/t.txt; test -L /workspace/link.txt && echo still-a-link");
    expect(r.output).toBe("through\nstill-a-link\n");
  });

  it("stats directories and missing paths", async () => {
    expect((await sb().files.stat("/workspace"))?.type).toBe("directory");
    expect(await sb().files.stat("/workspace/missing")).toBeUndefined();
  });

  it("refuses a read above the size bound with a clear error", async () => {
    await sb().shell.run("head -c 3000 /dev/zero > /workspace/3k");
    await expect(sb().files.read("/workspace/3k", { maxBytes: 1000 })).rejects.toThrow(
      /file too large: \/workspace\/3k is 3000 bytes, the limit is 1000/,
    );
  });

  it("gives clear errors for a missing file, a missing parent, a directory, a relative path", async () => {
    await expect(sb().files.read("/workspace/nope.txt")).rejects.toThrow(/no such file: \/workspace\/nope.txt/);
    await expect(sb().files.write("/workspace/no/such/dir/f.txt", Buffer.from("x"))).rejects.toThrow(
      /parent directory does not exist: \/workspace\/no\/such\/dir/,
    );
    await expect(sb().files.read("/workspace")).rejects.toThrow(/is a directory/);
    await expect(sb().files.read("relative.txt")).rejects.toThrow(/must be absolute/);
  });

  it("acts as uid 1000: a root-only file, /root and the private store are refused; nothing is written where uid 1000 may not", async () => {
    const root = (cmd: string) => box().exec(["bash", "-c", cmd], { user: "0:0" });
    await root(
      "umask 077; echo ROOT-CANARY > /tmp/root-only; echo kept > /tmp/root-owned; chmod 644 /tmp/root-owned; echo x > /root/r.txt; chmod 644 /root/r.txt",
    );
    for (const p of ["/tmp/root-only", "/root/r.txt", "/patchbay/git/config"])
      await expect(sb().files.read(p), p).rejects.toThrow(/permission denied/);
    await expect(sb().files.stat("/root/r.txt")).rejects.toThrow(/permission denied/);
    await expect(sb().files.write("/tmp/root-owned", Buffer.from("overwritten"))).rejects.toThrow(/permission denied/);
    await expect(sb().files.write("/patchbay/planted", Buffer.from("x"))).rejects.toThrow(/permission denied/);
    await expect(sb().files.mkdirp("/patchbay/planted-dir")).rejects.toThrow(/permission denied/);
    await expect(sb().files.remove("/tmp/root-owned")).rejects.toThrow(/permission denied|operation not permitted/i);
    const after = await root("cat /tmp/root-owned; ls -A /patchbay");
    expect(after.stdout.toString()).not.toMatch(/overwritten|planted/);
    expect(after.stdout.toString()).toMatch(/^kept\n/);
  });

  it("refuses a FIFO and other non-regular files to read, without hanging", async () => {
    await sb().shell.run("rm -f /workspace/fifo; mkfifo /workspace/fifo");
    await expect(sb().files.read("/workspace/fifo")).rejects.toThrow(/not a regular file/);
    await expect(sb().files.read("/dev/null")).rejects.toThrow(/not a regular file/);
  });

  it("mkdirp creates missing parents owned by uid 1000", async () => {
    await sb().files.mkdirp("/workspace/a/b/c");
    await sb().files.write("/workspace/a/b/c/f.txt", Buffer.from("deep"));
    const r = await sb().shell.run("stat -c '%u %a' /workspace/a /workspace/a/b/c; cat /workspace/a/b/c/f.txt");
    expect(r.output).toBe("1000 755\n1000 755\ndeep");
  });
});

describe.each([
  ["file agent", (s: Sandbox) => s.files],
  ["docker exec", (s: Sandbox) => new Files(s.box)],
])("sandbox.files via %s: hostile paths and a full disk (real engine)", (_lane, filesOf) => {
  const sandbox = useSandbox({ limits: { diskMb: 8 } });
  const box = () => ({ files: filesOf(sandbox()), shell: sandbox().shell, real: sandbox() });

  it("rejects a NUL byte in a path with a clear error and keeps working", async () => {
    await expect(box().files.read("/workspace/a\0b")).rejects.toThrow(/NUL byte/);
    const r = await new Toolbox(box().real).run({
      id: "x",
      name: "str_replace_based_edit_tool",
      input: { command: "view", path: "/workspace/\ud800" },
    });
    expect(r.isError).toBe(true);
    await box().files.write("/workspace/ok.txt", Buffer.from("still fine"));
    expect((await box().files.read("/workspace/ok.txt")).toString()).toBe("still fine");
  });

  it("an edit that does not fit on a full disk fails and leaves the file whole", async () => {
    const original = Buffer.from(Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join(""));
    await box().files.write("/workspace/f.txt", original);
    await box().shell.run("head -c 7000000 /dev/zero > /workspace/fill 2>/dev/null; true");
    await expect(
      box().files.write("/workspace/f.txt", Buffer.concat([original, Buffer.alloc(2_000_000, 121)])),
    ).rejects.toThrow(/no space left/);
    expect(Buffer.compare(await box().files.read("/workspace/f.txt"), original)).toBe(0);
  });

  it("writes through a dangling symlink to create its target", async () => {
    await box().shell.run("ln -sf target.txt /workspace/dangle");
    await box().files.write("/workspace/dangle", Buffer.from("made"));
    expect((await box().shell.run("cat /workspace/target.txt; test -L /workspace/dangle && echo link")).output).toBe(
      "madelink\n",
    );
  });
});

describe("sandbox.files through the file agent: a stat that reads, a write that splices (real engine)", () => {
  const box = useSandbox();
  const files = () => box().files;
  const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

  it("a stat with read brings a regular file within the bound back, and only that", async () => {
    await box().shell.run(
      "cd /workspace && printf 'hello\\n' > r.txt && ln -sf r.txt r.link && mkfifo r.fifo && printf 'x' > r.none && chmod 000 r.none && mkdir -p r.dir",
    );
    const st = await files().statRead("/workspace/r.txt", 100);
    expect(st).toMatchObject({ type: "file", size: 6 });
    expect(st?.bytes?.toString()).toBe("hello\n");
    expect((await files().statRead("/workspace/r.link", 100))?.bytes?.toString()).toBe("hello\n");
    expect((await files().statRead("/workspace/r.txt", 5))?.bytes).toBeUndefined();
    expect((await files().stat("/workspace/r.txt"))?.bytes).toBeUndefined();
    // A FIFO (without hanging), a directory, a file it may not read: the stat alone, as before.
    expect(await files().statRead("/workspace/r.fifo", 100)).toMatchObject({ type: "other" });
    expect((await files().statRead("/workspace/r.fifo", 100))?.bytes).toBeUndefined();
    expect((await files().statRead("/workspace/r.dir", 100))?.bytes).toBeUndefined();
    expect((await files().statRead("/workspace/r.none", 100))?.bytes).toBeUndefined();
    await expect(files().read("/workspace/r.none")).rejects.toThrow(/permission denied/);
    await expect(files().statRead("/root/x", 100)).rejects.toThrow(/permission denied/);
  });

  it("content the worker holds is not sent again, and only while the file holds it", async () => {
    const p = "/workspace/k.txt";
    const held = Buffer.from("held content\n");
    await files().write(p, held);
    const same = await files().statRead(p, 100, { sha256: sha(held), bytes: held });
    expect(same?.bytes).toBe(held);
    const other = Buffer.from("held CONTENT\n");
    const changed = await files().statRead(p, 100, { sha256: sha(other), bytes: other });
    expect(changed?.bytes?.toString()).toBe("held content\n");
  });

  it("a splice replaces one span of the content checked; a changed or missing file is left alone", async () => {
    const p = "/workspace/s.txt";
    const before = Buffer.from("one two three\n");
    await box().shell.run(`printf 'one two three\\n' > ${p} && chmod 0751 ${p}`);
    expect(await files().spliceIfUnchanged(p, sha(before), 4, 3, Buffer.from("TWO, 2"))).toBe(true);
    const r = await box().shell.run(`stat -c '%u %a' ${p}; cat ${p}`);
    expect(r.output).toBe("1000 751\none TWO, 2 three\n");
    expect(await files().spliceIfUnchanged(p, sha(before), 4, 3, Buffer.from("2"))).toBe(false);
    expect((await files().read(p)).toString()).toBe("one TWO, 2 three\n");
    const now = await files().read(p);
    await expect(files().spliceIfUnchanged(p, sha(now), 10, 100, Buffer.from("x"))).rejects.toThrow(/outside/);
    expect((await files().read(p)).toString()).toBe("one TWO, 2 three\n");
    expect(await files().spliceIfUnchanged("/workspace/gone.txt", sha(now), 0, 0, Buffer.from("x"))).toBe(false);
    expect(await files().stat("/workspace/gone.txt")).toBeUndefined();
  });
});

describe("sandbox.files.digest: a tree's fingerprint (real engine)", () => {
  const box = useSandbox();
  const sh = async (cmd: string) => {
    const r = await box().shell.run(cmd);
    expect(r.exitCode, r.output).toBe(0);
    return r.output.trim();
  };
  const digest = () => box().files.digest("/workspace");

  it("is the same after commands that only read, and differs after any write, even one that puts back size and mtime", async () => {
    await sh(
      "mkdir -p /workspace/d/e && printf 'AAAA\\n' > /workspace/d/e/a.txt && printf 'b\\n' > /workspace/b.txt && mkdir -p /workspace/.git && echo ref > /workspace/.git/HEAD",
    );
    const d0 = await digest();
    expect(d0).toMatch(/^[0-9a-f]{40}$/);
    await sh("cd /workspace && ls -laR >/dev/null && cat d/e/a.txt >/dev/null && grep -r AAAA . >/dev/null");
    expect(await digest()).toBe(d0);
    await sh("echo other > /workspace/.git/HEAD && touch /workspace/.git/index.lock"); // the agent's git, never in a patch
    expect(await digest()).toBe(d0);
    const changes = [
      "m=$(stat -c %.9Y d/e/a.txt); printf 'ZZZZ\\n' > d/e/a.txt; touch -m -d \"@$m\" d/e/a.txt", // only ctime tells
      "chmod +x b.txt",
      "touch d/new-empty",
      "mkdir d/e/f",
      "mv b.txt c.txt",
      "rm d/new-empty",
      "ln -s c.txt link",
    ];
    let last = d0;
    for (const c of changes) {
      await sh(`cd /workspace && ${c}`);
      const d = await digest();
      expect(d, c).not.toBe(last);
      last = d!;
    }
  });

  it("is undefined over its entry bound and where the agent cannot read", async () => {
    await sh("mkdir -p /workspace/many && for i in 1 2 3 4 5; do touch /workspace/many/f$i; done");
    expect(await box().files.digest("/workspace/many", 3)).toBeUndefined();
    expect(await box().files.digest("/workspace/many", 5)).toMatch(/^[0-9a-f]{40}$/);
    await sh("mkdir -p /workspace/many/closed && chmod 000 /workspace/many/closed");
    expect(await box().files.digest("/workspace/many")).toBeUndefined();
  });
});

// The fallback as a job meets it: a sandbox whose file agent died and cannot be started again (a
// fork bomb holding the pids limit at the restart; an image without python3 takes the same path).
describe("a sandbox whose file agent is dead: the editor acts as uid 1000 (real engine)", () => {
  const box = useSandbox();
  const edit = (input: Record<string, unknown>) =>
    new Toolbox(box()).run({ id: "t", name: "str_replace_based_edit_tool", input });
  beforeAll(async () => {
    const agent = (box() as unknown as { agent: FileAgent }).agent;
    (agent as unknown as { argv: string[] }).argv = ["/nonexistent/python3"]; // every restart fails
    agent.close();
    expect(await agent.request({ op: "stat", path: "/" })).toBeUndefined();
  });

  it("view of a root-only file, of /root or the private store is refused, as through the file agent; the workspace works", async () => {
    await box().exec(["bash", "-c", "umask 077; echo ROOT-CANARY > /tmp/secret; echo ROOT-CANARY > /root/secret"], {
      user: "0:0",
    });
    for (const p of ["/tmp/secret", "/root/secret", "/root", "/patchbay", "/patchbay/git/config"]) {
      const r = await edit({ command: "view", path: p });
      expect(r.isError, `${p}: ${r.content}`).toBe(true);
      expect(r.content, p).toMatch(/ermission denied/);
      expect(r.content).not.toContain("ROOT-CANARY");
    }
    const made = await edit({ command: "create", path: "/patchbay/planted", file_text: "x\n" });
    expect(made.isError).toBe(true);
    expect((await box().exec(["ls", "-A", "/patchbay"], { user: "0:0" })).stdout.toString()).not.toMatch(/planted/);

    expect((await edit({ command: "create", path: "/workspace/a.txt", file_text: "one\ntwo\n" })).isError).toBe(false);
    expect(
      (await edit({ command: "str_replace", path: "/workspace/a.txt", old_str: "two", new_str: "TWO" })).isError,
    ).toBe(false);
    expect((await edit({ command: "view", path: "/workspace/a.txt" })).content).toMatch(/1\tone\n\s*2\tTWO/);
    expect((await box().exec(["stat", "-c", "%u:%g %a", "/workspace/a.txt"])).stdout.toString()).toBe(
      "1000:1000 644\n",
    );
  });
});
