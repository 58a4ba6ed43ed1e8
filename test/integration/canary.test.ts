// Guards the canary search the credential tests trust to say a secret is nowhere in a sandbox
// (test/support/canary.ts): a canary planted in a file (raw, inside a longer base64 text at each
// alignment, and as a Basic credential), in a process's environment, in a process's argv, and only
// in the memory of a running process (built at run time, so in no argv or file) is each found,
// and where; a canary planted nowhere, and a clean sandbox, give nothing. It says how long a
// search of the default image takes.
//
// Backend: Docker (the search runs in the container with docker exec).
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { canaryNeedles, findCanary, searchCanary, type Finding } from "../support/canary.js";
import { untilInSandbox } from "../support/backend.js";
import { useSandbox } from "../support/sandbox.js";

const fresh = () => randomBytes(16).toString("hex");
const sandbox = useSandbox();
const clean = useSandbox();

// docker exec as the agent's uid; the canary reaches the container on stdin or through -e only,
// so that no process left in it holds one it was not meant to.
async function dockerExec(args: string[], stdin?: string): Promise<void> {
  const run = promisify(execFile)("docker", ["exec", ...(stdin === undefined ? [] : ["-i"]), ...args]);
  if (stdin !== undefined) run.child.stdin!.end(stdin);
  await run;
}

const wheres = (fs: Finding[]) => [...new Set(fs.map((f) => f.where))].sort();

describe("canaryNeedles", () => {
  it("finds the canary's base64 whatever bytes surround it, and refuses a short canary", () => {
    const canary = fresh();
    const cores = canaryNeedles(canary).filter((n) => n.form === "base64");
    for (let before = 0; before < 6; before++)
      for (let after = 0; after < 4; after++) {
        const text = Buffer.from(`${"p".repeat(before)}${canary}${"s".repeat(after)}`).toString("base64");
        expect(cores.some((n) => text.includes(n.bytes.toString()))).toBe(true);
      }
    expect(canaryNeedles(canary, "ci-bot").at(-1)).toEqual({
      form: "basic",
      bytes: Buffer.from(Buffer.from(`ci-bot:${canary}`).toString("base64")),
    });
    expect(() => canaryNeedles("short")).toThrow(/16 bytes at least/);
  });
});

describe("findCanary", () => {
  it("finds a canary in a file, an environment, an argv and a process's memory only, each where it is", async () => {
    const name = sandbox().name;
    const [inFile, inBase64, inBasic, inEnv, inArgv, inMemory] = [fresh(), fresh(), fresh(), fresh(), fresh(), fresh()];
    await dockerExec([name, "sh", "-c", "mkdir -p /tmp/planted && cat > /tmp/planted/raw.txt"], `token=${inFile}\n`);
    const b64 = Buffer.from(`x-${inBase64}-y`).toString("base64");
    await dockerExec([name, "sh", "-c", "cat > /workspace/b64.txt"], `data: ${b64}\n`);
    const basic = Buffer.from(`ci-bot:${inBasic}`).toString("base64");
    await dockerExec([name, "sh", "-c", "cat > /tmp/planted/basic.txt"], `Authorization: Basic ${basic}\n`);
    await dockerExec(["-d", "-u", "1000:1000", "-e", `PLANTED=${inEnv}`, name, "sleep", "3600"]);
    // A shell that keeps its argv (the canary its $1) while its child sleeps.
    await dockerExec(["-d", "-u", "1000:1000", name, "sh", "-c", "sleep 3600; :", "planted", inArgv]);
    // The canary shifted by one character in argv; the real one exists only once python built it.
    const shifted = [...inMemory].map((c) => String.fromCharCode(c.charCodeAt(0) - 1)).join("");
    const hold = `import time; s = "".join(chr(ord(c) + 1) for c in "${shifted}"); open("/tmp/mem-ready", "w").close(); time.sleep(3600)`;
    await dockerExec(["-d", "-u", "1000:1000", name, "python3", "-c", hold]);
    await untilInSandbox("docker", name, "test -e /tmp/mem-ready");

    expect(await findCanary(name, inFile)).toEqual([{ where: "file", path: "/tmp/planted/raw.txt", form: "raw" }]);
    expect(await findCanary(name, inBase64)).toEqual([{ where: "file", path: "/workspace/b64.txt", form: "base64" }]);
    const basicFound = await findCanary(name, inBasic, { user: "ci-bot" });
    expect(basicFound.map((f) => f.path)).toEqual(["/tmp/planted/basic.txt", "/tmp/planted/basic.txt"]);
    expect(basicFound.map((f) => f.form).sort()).toEqual(["base64", "basic"]);

    // An environment and an argv are in the process's memory too (its stack holds them).
    const env = await findCanary(name, inEnv);
    expect(wheres(env)).toEqual(["environ", "memory"]);
    expect(env.every((f) => f.comm === "sleep" && f.pid === env[0]!.pid)).toBe(true);
    const argv = await findCanary(name, inArgv);
    expect(wheres(argv)).toEqual(["cmdline", "memory"]);
    expect(argv.every((f) => f.comm === "sh")).toBe(true);
    const memory = await findCanary(name, inMemory);
    expect(memory).toEqual([{ where: "memory", pid: memory[0]?.pid, comm: "python3", form: "raw" }]);
  });

  it("finds a canary planted nowhere nowhere, and nothing in a clean sandbox; says what it covered", async () => {
    expect(await findCanary(sandbox().name, fresh(), { user: "ci-bot" })).toEqual([]);
    const started = Date.now();
    const report = await searchCanary(clean().name, fresh(), { user: "ci-bot" });
    console.log(
      `canary search of a clean sandbox: ${Date.now() - started} ms, ${report.files} files (${report.fileBytes} bytes), ` +
        `${report.processes} processes (${report.memoryBytes} bytes of memory)`,
    );
    expect(report.findings).toEqual([]);
    // It looked: the image's files, and the sandbox's own processes and their memory.
    expect(report.files).toBeGreaterThan(1000);
    expect(report.processes).toBeGreaterThan(0);
    expect(report.memoryBytes).toBeGreaterThan(0);
  });
});
