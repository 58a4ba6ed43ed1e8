// The model's tools end to end on a real sandbox: every conformance case through runTool's
// path (SandboxFs over the archive API), the bash tool, edit_file, and malformed calls.
//
// Backend: Docker (the image's tar, git and tools).
import { describe, expect, it } from "vitest";
import { Toolbox, runTool } from "../../../src/tools/index.js";
import { TextEditor } from "../../../src/tools/editor.js";
import { SandboxFs } from "../../../src/tools/editor-tool.js";
import { loadConformanceCases, runConformanceCase } from "../../support/conformance-cases.js";
import { useSandbox } from "../../support/sandbox.js";

const cases = loadConformanceCases();
let seq = 0;
const call = (name: string, input: unknown) => ({ id: `toolu_${++seq}`, name, input });

describe("editor conformance (real sandbox)", () => {
  const sb = useSandbox();
  it.each(cases.map((c) => [c.id, c] as const))("%s", async (_id, c) => {
    const fs = new SandboxFs(sb());
    await runConformanceCase(c, (flavor) => new TextEditor(fs, { flavor }), fs);
  });
});

describe("editor on the sandbox: bytes and races", () => {
  const sb = useSandbox();
  const bytesOf = async (p: string) => sb().files.read(p);

  it("edits keep CRLF, tabs, Latin-1 bytes and the missing final newline, byte for byte", async () => {
    const before = Buffer.concat([Buffer.from("a\tb\r\ncaf"), Buffer.from([0xe9]), Buffer.from("\r\nold line\r\nend")]);
    await sb().files.write("/workspace/mixed.txt", before);
    const r = await runTool(
      sb(),
      call("str_replace_based_edit_tool", {
        command: "str_replace",
        path: "/workspace/mixed.txt",
        old_str: "old line",
        new_str: "new\tline",
      }),
    );
    expect(r.isError).toBe(false);
    const after = Buffer.concat([Buffer.from("a\tb\r\ncaf"), Buffer.from([0xe9]), Buffer.from("\r\nnew\tline\r\nend")]);
    expect(Buffer.compare(await bytesOf("/workspace/mixed.txt"), after)).toBe(0);
  });

  it("refuses an edit when bash wrote the file between the editor's read and write", async () => {
    await sb().files.write("/workspace/race.txt", Buffer.from("x = 1\n"));
    const fs = new SandboxFs(sb());
    // Bash writes right after the editor has the file's bytes: with its stat (the file agent reads
    // it with the stat), or from a read of its own.
    let reads = 0;
    const bash = (p: string) => sb().shell.run(`echo 'x = 2  # from bash' > ${p}`);
    const racy = Object.assign(Object.create(fs), {
      stat: async (p: string, read?: number) => {
        const st = await fs.stat(p, read);
        if (st.bytes && ++reads === 1) await bash(p);
        return st;
      },
      read: async (p: string) => {
        const got = await fs.read(p);
        if (++reads === 1) await bash(p);
        return got;
      },
    });
    const ed = new TextEditor(racy, {});
    const r = await ed.run({ command: "str_replace", path: "/workspace/race.txt", old_str: "x = 1", new_str: "x = 3" });
    expect(r.isError).toBe(true);
    expect(r.content).toMatch(/changed while this edit was being made.*View the file again/s);
    expect((await bytesOf("/workspace/race.txt")).toString()).toBe("x = 2  # from bash\n");
  });

  it("a file bash changed since the editor last had it is shown and edited as it is now", async () => {
    const p = "/workspace/held.txt";
    await sb().files.write(p, Buffer.from("alpha\nbeta\n"));
    const box = new Toolbox(sb());
    const edit = (input: Record<string, unknown>) =>
      box.run(call("str_replace_based_edit_tool", { path: p, ...input }));
    expect((await edit({ command: "view" })).content).toMatch(/1\talpha\n\s*2\tbeta/);
    // The same size and the same mtime second: only the content tells.
    await sb().shell.run(`printf 'gamma\ndelta\n' > ${p}; touch -d @1 ${p}`);
    expect((await edit({ command: "view" })).content).toMatch(/1\tgamma\n\s*2\tdelta/);
    expect((await edit({ command: "str_replace", old_str: "delta", new_str: "DELTA" })).isError).toBe(false);
    await sb().shell.run(`sed -i s/gamma/GAMMA/ ${p}`);
    expect((await edit({ command: "str_replace", old_str: "DELTA", new_str: "epsilon" })).isError).toBe(false);
    expect((await bytesOf(p)).toString()).toBe("GAMMA\nepsilon\n");
    await sb().shell.run(`rm ${p}`);
    expect((await edit({ command: "view" })).content).toMatch(/does not exist/);
  });

  it("keeps the mode and owner of an edited executable", async () => {
    await sb().shell.run("printf '#!/bin/sh\\necho one\\n' > /workspace/tool.sh; chmod 755 /workspace/tool.sh");
    await runTool(
      sb(),
      call("str_replace_based_edit_tool", {
        command: "str_replace",
        path: "/workspace/tool.sh",
        old_str: "one",
        new_str: "two",
      }),
    );
    expect((await sb().shell.run("stat -c '%u %a' /workspace/tool.sh; /workspace/tool.sh")).output).toBe(
      "1000 755\ntwo\n",
    );
  });

  it("answers malformed calls with is_error naming the field, never a throw", async () => {
    await sb().files.write("/workspace/x", Buffer.from("x\n"));
    const bad = [
      call("str_replace_based_edit_tool", { command: "str_replace", path: "/workspace/x", old_str: 42 }),
      call("str_replace_based_edit_tool", { path: "/workspace/x" }),
      call("str_replace_based_edit_tool", "not an object"),
      call("bash", { command: ["ls"] }),
      call("no_such_tool", {}),
    ];
    const out = await Promise.all(bad.map((b) => runTool(sb(), b)));
    expect(out.every((o) => o.isError)).toBe(true);
    expect(out[0]!.content).toMatch(/old_str/);
    expect(out[1]!.content).toMatch(/command/);
    expect(out[2]!.content).toMatch(/JSON object/);
    expect(out[3]!.content).toMatch(/command/);
    expect(out[4]!.content).toMatch(/Unknown tool `no_such_tool`.*bash, str_replace_based_edit_tool/);
  });

  it("relative paths get the /workspace hint", async () => {
    const r = await runTool(sb(), call("str_replace_based_edit_tool", { command: "view", path: "src/main.py" }));
    expect(r).toMatchObject({
      isError: true,
      content:
        "The path src/main.py is not an absolute path, it should start with `/`. Maybe you meant /workspace/src/main.py?",
    });
  });
});

describe("bash tool (real sandbox)", () => {
  const sb = useSandbox();
  const bash = (input: unknown, timeoutSec = 10) =>
    new Toolbox(sb(), { commandTimeoutSec: timeoutSec }).run(call("bash", input));

  it("keeps cwd and env between calls", async () => {
    const box = new Toolbox(sb());
    await box.run(call("bash", { command: "mkdir -p /tmp/w && cd /tmp/w && export GREETING=hi" }));
    expect((await box.run(call("bash", { command: "pwd; echo $GREETING" }))).content).toBe("/tmp/w\nhi");
  });

  it("reports a non-zero exit code on its own last line, not as a tool error", async () => {
    const r = await bash({ command: "echo partial; exit_with() { return $1; }; exit_with 3" });
    expect(r).toMatchObject({ content: "partial\n[exit code 3]", isError: false });
  });

  it("interleaves stderr with stdout in order", async () => {
    expect((await bash({ command: "echo 1; echo 2 >&2; echo 3; echo 4 >&2" })).content).toBe("1\n2\n3\n4");
  });

  it("kills a command at its timeout, says how long it ran, and the next call works", async () => {
    const box = new Toolbox(sb(), { commandTimeoutSec: 1 });
    const r = await box.run(call("bash", { command: "echo started; sleep 60" }));
    expect(r.isError).toBe(true);
    expect(r.content).toMatch(/^started\n[\s\S]*\[the command timed out after \d+\.\d s \(limit 1 s\) and was killed/);
    // Not bash's own notice of the kill ("main: line 25:    40 Killed   sleep 60"): the result says it.
    expect(r.content).not.toMatch(/Killed/);
    expect((await box.run(call("bash", { command: "echo next" }))).content).toBe("next");
  });

  it("restart gives a fresh shell", async () => {
    const box = new Toolbox(sb());
    await box.run(call("bash", { command: "export STATE=kept; cd /tmp" }));
    expect(await box.run(call("bash", { restart: true }))).toMatchObject({
      content: "tool has been restarted.",
      isError: false,
    });
    expect((await box.run(call("bash", { command: "echo ${STATE:-gone}; pwd" }))).content).toBe("gone\n/workspace");
  });

  it("neither command nor restart is an error", async () => {
    expect(await bash({})).toMatchObject({ content: "no command provided.", isError: true });
  });

  it("cuts 100 MB of output keeping head and tail with the count of what was cut", async () => {
    const r = await bash({ command: "echo FIRST; head -c 100000000 /dev/zero | tr '\\0' 'x'; echo; echo LAST" }, 60);
    expect(r.content.startsWith("FIRST\nxxx")).toBe(true);
    expect(r.content.endsWith("xxx\nLAST")).toBe(true);
    expect(r.content).toMatch(/\[\.\.\. \d+ bytes of output cut \(100000012 in all\)/);
    expect(r.content.length).toBeLessThan(31_000);
  });
});

describe("edit_file tool (real sandbox)", () => {
  const sb = useSandbox();
  const edit = (input: unknown) => runTool(sb(), call("edit_file", input), { tools: "edit_file" });

  it("creates a file and its parents with an empty old_string", async () => {
    expect(await edit({ path: "/workspace/new/dir/f.txt", old_string: "", new_string: "hello\n" })).toMatchObject({
      isError: false,
      content: "Created file /workspace/new/dir/f.txt",
    });
    expect((await sb().files.read("/workspace/new/dir/f.txt")).toString()).toBe("hello\n");
  });

  it("replaces exactly one occurrence, refuses 0 and 2+", async () => {
    await sb().files.write("/workspace/e.txt", Buffer.from("a\nb\na\n"));
    expect((await edit({ path: "/workspace/e.txt", old_string: "zzz", new_string: "y" })).content).toMatch(
      /old_string not found in \/workspace\/e.txt. Re-read the file/,
    );
    expect((await edit({ path: "/workspace/e.txt", old_string: "a\n", new_string: "y\n" })).content).toMatch(
      /appears 2 times in \/workspace\/e.txt; it must appear exactly once. Include more surrounding context/,
    );
    const ok = await edit({ path: "/workspace/e.txt", old_string: "b\na", new_string: "B\nA" });
    expect(ok.isError).toBe(false);
    expect((await sb().files.read("/workspace/e.txt")).toString()).toBe("a\nB\nA\n");
  });

  it("names the missing field", async () => {
    expect((await edit({ path: "/workspace/e.txt", old_string: "a" })).content).toMatch(/`new_string` is required/);
  });

  it("offers bash and edit_file as JSON-schema tools", () => {
    const defs = new Toolbox(sb(), { tools: "edit_file" }).definitions() as { name: string; input_schema?: unknown }[];
    expect(defs.map((d) => d.name)).toEqual(["bash", "edit_file"]);
    expect(defs.every((d) => d.input_schema)).toBe(true);
  });
});
