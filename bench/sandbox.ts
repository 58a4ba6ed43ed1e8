// Sandbox core and tools: tool-call overhead vs the docker CLI and a fresh API exec,
// sandbox create→ready, and a str_replace on a 100 KB file vs a docker cp round trip.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "../src/sandbox/sandbox.js";
import { Toolbox } from "../src/tools/index.js";
import { execFileP, log, round, timeMedian } from "./lib.js";

export async function benchShell() {
  const sb = await Sandbox.create({ labels: { "patchbay.bench": "1" } });
  try {
    log("shell round trip: patchbay shell, docker exec (CLI), fresh API exec");
    const shell = await timeMedian(300, () => sb.shell.run("true"));
    const cli = await timeMedian(15, () => execFileP("docker", ["exec", "-u", "1000", sb.name, "true"]));
    const api = await timeMedian(15, async () => {
      const r = await sb.exec(["true"]);
      if (r.exitCode !== 0) throw new Error("exec failed");
    });
    return {
      shell_roundtrip_ms: shell,
      cli_docker_exec_ms: cli,
      api_fresh_exec_ms: api,
      ratio_cli_over_shell: round(cli / shell, 1),
      ratio_api_over_shell: round(api / shell, 1),
    };
  } finally {
    await sb.destroy();
  }
}

export async function benchCreate() {
  log("sandbox create→ready (container + volume + shell + file agent)");
  const made: Sandbox[] = [];
  const ready = await timeMedian(
    9,
    async () => made.push(await Sandbox.create({ labels: { "patchbay.bench": "1" } })),
    1,
  );
  await Promise.all(made.map((s) => s.destroy()));
  const destroy = await timeMedian(
    5,
    async () => {
      const s = await Sandbox.create({ labels: { "patchbay.bench": "1" } });
      const t0 = performance.now();
      await s.destroy();
      return performance.now() - t0;
    },
    0,
  );
  return { create_ready_ms: ready, destroy_ms: destroy };
}

export async function benchEditor() {
  const sb = await Sandbox.create({ labels: { "patchbay.bench": "1" } });
  const dir = mkdtempSync(join(tmpdir(), "pb-bench-"));
  try {
    const text =
      Array.from({ length: 1700 }, (_, i) => `line ${String(i).padStart(4, "0")}: ${"lorem ipsum ".repeat(4)}`).join(
        "\n",
      ) + "\n";
    const path = "/workspace/big.txt";
    await sb.files.write(path, Buffer.from(text));
    const box = new Toolbox(sb);
    const swap = (i: number) => (i % 2 ? ["line 0850: ", "LINE 0850: "] : ["LINE 0850: ", "line 0850: "]);
    let k = 0;
    log(`editor: str_replace / view on a ${Buffer.byteLength(text)} byte file, and the docker cp round trip`);
    await box.run({
      id: "x",
      name: "str_replace_based_edit_tool",
      input: { command: "str_replace", path, old_str: "line 0850: ", new_str: "LINE 0850: " },
    });
    const strReplace = await timeMedian(
      40,
      async () => {
        const [o, n] = swap(k++);
        const r = await box.run({
          id: "x",
          name: "str_replace_based_edit_tool",
          input: { command: "str_replace", path, old_str: o, new_str: n },
        });
        if (r.isError) throw new Error(r.content);
      },
      0,
    );
    const view = await timeMedian(40, () =>
      box.run({ id: "x", name: "str_replace_based_edit_tool", input: { command: "view", path } }),
    );
    // A view by an editor that has never had the file (a new Toolbox each time): its 100 KB come out
    // of the sandbox, where the views and edits above find it unchanged and have it not sent again.
    const viewCold = await timeMedian(40, () =>
      new Toolbox(sb).run({ id: "x", name: "str_replace_based_edit_tool", input: { command: "view", path } }),
    );
    // What a user scripts without patchbay: copy out, edit on the host, copy back in.
    let j = 0;
    const dockerCp = await timeMedian(10, async () => {
      const local = join(dir, "big.txt");
      await execFileP("docker", ["cp", `${sb.name}:${path}`, local]);
      const [o, n] = swap(j++ + k);
      writeFileSync(local, readFileSync(local, "utf8").replace(o!, n!));
      await execFileP("docker", ["cp", local, `${sb.name}:${path}`]);
    });
    return {
      file_bytes: Buffer.byteLength(text),
      str_replace_ms: strReplace,
      view_ms: view,
      view_cold_ms: viewCold,
      docker_cp_roundtrip_ms: dockerCp,
      ratio_docker_cp_over_str_replace: round(dockerCp / strReplace, 1),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await sb.destroy();
  }
}
