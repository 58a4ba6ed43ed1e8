// Container files through the archive API, byte-exact, against a real container.
import { describe, expect, it } from "vitest";
import { Files } from "../src/sandbox/files.js";
import type { Sandbox } from "../src/sandbox/sandbox.js";
import { useSandbox } from "./support/sandbox.js";

// Both lanes: the in-container file agent (the default) and the archive API (bulk and fallback).
describe.each([
  ["file agent", (s: Sandbox) => s.files],
  ["archive API", (s: Sandbox) => new Files(s.container)],
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

  it("round-trips every byte value", () => roundTrip("all.bin", Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256))));
  it("round-trips CRLF", () => roundTrip("crlf.txt", Buffer.from("a\r\nb\r\n\r\nc\r\n")));
  it("round-trips a file without final newline", () => roundTrip("nofinal.txt", Buffer.from("no newline at the end")));
  it("round-trips an empty file", () => roundTrip("empty.txt", Buffer.alloc(0)));
  it("round-trips a 5 MB file", () => roundTrip("big.bin", Buffer.from(Array.from({ length: 5 * 1024 * 1024 }, (_, i) => (i * 7919) % 251))));

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
    await sb().shell.run("mkdir -p /workspace/real && echo target > /workspace/real/t.txt && ln -sf real/t.txt /workspace/link.txt");
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
    await expect(sb().files.read("/workspace/3k", { maxBytes: 1000 })).rejects.toThrow(/file too large: \/workspace\/3k is 3000 bytes, the limit is 1000/);
  });

  it("gives clear errors for a missing file, a missing parent, a directory, a relative path", async () => {
    await expect(sb().files.read("/workspace/nope.txt")).rejects.toThrow(/no such file: \/workspace\/nope.txt/);
    await expect(sb().files.write("/workspace/no/such/dir/f.txt", Buffer.from("x"))).rejects.toThrow(/parent directory does not exist: \/workspace\/no\/such\/dir/);
    await expect(sb().files.read("/workspace")).rejects.toThrow(/is a directory/);
    await expect(sb().files.read("relative.txt")).rejects.toThrow(/must be absolute/);
  });

  it("mkdirp creates missing parents owned by uid 1000", async () => {
    await sb().files.mkdirp("/workspace/a/b/c");
    await sb().files.write("/workspace/a/b/c/f.txt", Buffer.from("deep"));
    const r = await sb().shell.run("stat -c '%u %a' /workspace/a /workspace/a/b/c; cat /workspace/a/b/c/f.txt");
    expect(r.output).toBe("1000 755\n1000 755\ndeep");
  });
});

describe("sandbox.files: hostile paths and a full disk (real engine)", () => {
  const box = useSandbox({ limits: { diskMb: 8 } });

  it("rejects a NUL byte in a path with a clear error and keeps working", async () => {
    await expect(box().files.read("/workspace/a\0b")).rejects.toThrow(/NUL byte/);
    const { Toolbox } = await import("../src/tools/index.js");
    const r = await new Toolbox(box()).run({ id: "x", name: "str_replace_based_edit_tool", input: { command: "view", path: "/workspace/\ud800" } });
    expect(r.isError).toBe(true);
    await box().files.write("/workspace/ok.txt", Buffer.from("still fine"));
    expect((await box().files.read("/workspace/ok.txt")).toString()).toBe("still fine");
  });

  it("an edit that does not fit on a full disk fails and leaves the file whole", async () => {
    const original = Buffer.from(Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join(""));
    await box().files.write("/workspace/f.txt", original);
    await box().shell.run("head -c 7000000 /dev/zero > /workspace/fill 2>/dev/null; true");
    await expect(box().files.write("/workspace/f.txt", Buffer.concat([original, Buffer.alloc(2_000_000, 121)]))).rejects.toThrow(/no space left/);
    expect(Buffer.compare(await box().files.read("/workspace/f.txt"), original)).toBe(0);
  });

  it("writes through a dangling symlink to create its target", async () => {
    await box().shell.run("ln -sf target.txt /workspace/dangle");
    await box().files.write("/workspace/dangle", Buffer.from("made"));
    expect((await box().shell.run("cat /workspace/target.txt; test -L /workspace/dangle && echo link")).output).toBe("madelink\n");
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
    await sh("mkdir -p /workspace/d/e && printf 'AAAA\\n' > /workspace/d/e/a.txt && printf 'b\\n' > /workspace/b.txt && mkdir -p /workspace/.git && echo ref > /workspace/.git/HEAD");
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
