// The local backend, for tests and simulations only: a directory per box on this host, and
// processes that see it at /workspace, /patchbay and /tmp through a mount namespace of the box's
// own, in a pid namespace of its own (so a kill of the agent's uid stays inside) and a network
// namespace with nothing in it. It runs the host's own bash, git, python3 and tar, as root and as
// uid 1000. It is no security boundary: the host's files are the box's, its uid 1000 is the host's,
// and no limit (memory, pids, disk) holds. A worker refuses it unless PATCHBAY_TEST_BACKENDS=1.
// Needs root and util-linux's unshare and nsenter (Linux); makes /workspace and /patchbay on the
// host as mount points (empty; what the boxes mount there is theirs alone).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeGathered } from "./gather.js";
import { AGENT_USER } from "./agent-user.js";
import { LABEL } from "./owner.js";
import {
  BOX_ENV_VAR,
  PRIVATE_DIR,
  TRUSTED_ENV,
  type Attached,
  type Box,
  type BoxSpec,
  type BoxState,
  type ProcessOptions,
  type ReapReport,
  type Backend,
} from "./types.js";

/** What a Docker image's ENV gives every process of the sandbox image; the same here. */
const BASE_ENV = [
  "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  "HOME=/home/agent",
  "LANG=C.UTF-8",
  "GIT_CONFIG_NOSYSTEM=1",
  "PYTHONDONTWRITEBYTECODE=1",
];
const NAME = /^[a-z0-9][a-z0-9_.-]{0,127}$/;
// Where the box's pid 1 and nsenter start: the box's own /tmp hides the caller's directory when it
// is under /tmp (a checkout there made pyenv's python3 shim fail and the box die at once), and the
// box's PATH, not the worker's, finds its python3.
const OUTSIDE = { cwd: "/", env: { PATH: BASE_ENV[0]!.slice("PATH=".length), LANG: "C.UTF-8" } };
const REAPER = ["import os, time", "while True:", "  try: os.wait()", "  except ChildProcessError: time.sleep(1)"].join(
  "\n",
);

export class LocalBackend implements Backend {
  readonly kind = "local";
  private readonly boxes = new Map<string, LocalBox>();

  constructor(private readonly base = join(tmpdir(), "patchbay-local")) {}

  async create(spec: BoxSpec): Promise<Box> {
    if (!NAME.test(spec.name)) throw new Error(`local backend: a box name must match ${NAME}: ${spec.name}`);
    const problem = this.problem();
    if (problem) throw new Error(problem);
    const root = join(this.base, spec.name);
    for (const [dir, mode] of [
      ["workspace", 0o755],
      ["patchbay", 0o700],
      ["tmp", 0o1777],
    ] as const) {
      mkdirSync(join(root, dir), { recursive: true });
      chmodSync(join(root, dir), mode); // (mkdir's mode passes the umask)
    }
    chownSync(join(root, "workspace"), 1000, 1000);
    writeFileSync(join(root, "labels.json"), JSON.stringify(spec.labels));
    const targets = ["/workspace", PRIVATE_DIR, ...(spec.mounts ?? []).map((m) => m.target)];
    for (const t of targets) mkdirSync(t, { recursive: true });
    const binds = [
      `mount --bind "$1/workspace" /workspace`,
      `mount --bind "$1/patchbay" ${PRIVATE_DIR}`,
      `mount --bind "$1/tmp" /tmp`,
      ...(spec.mounts ?? []).map(
        (m, i) => `mount --bind "\${${i + 2}}" '${m.target}' && mount -o remount,bind,ro '${m.target}'`,
      ),
    ];
    // pid 1 of the box: the mounts, then a line to say so, then reaping what is left to it (as
    // Docker's tini does). --kill-child: when unshare dies (remove() kills it), so does the box's
    // pid 1, and with it every process in it.
    const init = spawn(
      "unshare",
      [
        "--mount",
        "--pid",
        "--net",
        "--fork",
        "--mount-proc",
        "--propagation",
        "private",
        "--kill-child",
        "--",
        "bash",
        "-c",
        `set -e; ${binds.join("; ")}; echo ready; exec python3 -I -S -c "${REAPER}"`,
        "init",
        root,
        ...(spec.mounts ?? []).map((m) => m.source),
      ],
      { stdio: ["ignore", "pipe", "pipe"], detached: true, ...OUTSIDE },
    );
    let said = "";
    const ready = await new Promise<boolean>((resolve) => {
      init.stdout.on("data", (d: Buffer) => ((said += d.toString()), /ready\n/.test(said) && resolve(true)));
      init.stderr.on("data", (d: Buffer) => (said += d.toString()));
      init.once("exit", () => resolve(false));
    });
    if (!ready) {
      removeTree(root);
      throw new Error(`local backend: the box would not start: ${said.trim().slice(-400)}`);
    }
    writeFileSync(join(root, "init.pid"), String(init.pid));
    const box = new LocalBox(spec.name, init);
    this.boxes.set(spec.name, box);
    return box;
  }

  async remove(name: string): Promise<void> {
    if (!NAME.test(name)) return;
    const root = join(this.base, name);
    const box = this.boxes.get(name);
    this.boxes.delete(name);
    // A pid from a file is killed only while it is still an unshare (not a pid reused since).
    const pid = box?.pid ?? Number(readIf(join(root, "init.pid")));
    if (pid && (box || /unshare/.test(readIf(`/proc/${pid}/cmdline`) ?? ""))) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
      if (box) await box.exited;
    }
    removeTree(root);
  }

  async retryRemovals(): Promise<number> {
    return 0; // a removal here does not fail for want of an engine
  }

  async reap(dead: (labels: Record<string, string>) => Promise<boolean>): Promise<ReapReport> {
    const report: ReapReport = { containers: [], volumes: [] };
    for (const name of existsSync(this.base) ? readdirSync(this.base) : []) {
      let labels: Record<string, string>;
      try {
        labels = JSON.parse(readFileSync(join(this.base, name, "labels.json"), "utf8")) as Record<string, string>;
      } catch {
        continue; // one being made
      }
      if (labels[LABEL.managed] && (await dead(labels))) {
        await this.remove(name);
        report.containers.push(name);
      }
    }
    return report;
  }

  async health(): Promise<string | undefined> {
    return this.problem();
  }

  private checked?: string | false;
  private problem(): string | undefined {
    if (this.checked === undefined) {
      this.checked = false;
      if (process.platform !== "linux" || process.getuid?.() !== 0)
        this.checked = "the local backend needs Linux and root (it makes mount and pid namespaces)";
      else
        for (const tool of ["unshare", "nsenter", "setpriv", "python3"])
          if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0)
            this.checked ||= `the local backend needs ${tool} on the host`;
    }
    return this.checked || undefined;
  }
}

/** GNU rm: it walks with openat, so a tree deeper than PATH_MAX (a hostile setup's) goes too. */
function removeTree(dir: string): void {
  if (spawnSync("rm", ["-rf", "--one-file-system", "--", dir]).status !== 0)
    rmSync(dir, { recursive: true, force: true });
}

function readIf(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** A box of the local backend: its pid 1 is the child of `unshare`, whose namespaces nsenter joins. */
class LocalBox implements Box {
  readonly exited: Promise<void>;
  private exitCode?: number;

  constructor(
    readonly name: string,
    private readonly init: ChildProcess,
  ) {
    this.exited = new Promise((r) => init.once("exit", (code) => ((this.exitCode = code ?? 137), r())));
    init.stdout?.resume();
    init.stderr?.resume();
  }

  get pid(): number {
    return this.init.pid!;
  }

  async state(): Promise<BoxState> {
    return this.exitCode === undefined ? { running: true } : { running: false, exitCode: this.exitCode };
  }

  async attach(
    argv: string[],
    onData: (chunk: Buffer, stream: 1 | 2) => void,
    opts: ProcessOptions = {},
  ): Promise<Attached> {
    if (this.exitCode !== undefined)
      throw Object.assign(new Error(`the local box ${this.name} is not running`), { statusCode: 409 });
    const [uid = "1000", gid = uid] = (opts.user ?? AGENT_USER).split(":");
    const as =
      uid === "0" ? [] : ["setpriv", `--reuid=${uid}`, `--regid=${gid}`, `--groups=${gid}`, "--inh-caps=-all", "--"];
    // A root process gets TRUSTED_ENV, with the box's own for the agent's processes (as docker.ts).
    const env = [
      ...(uid === "0" ? [...TRUSTED_ENV, `${BOX_ENV_VAR}=${JSON.stringify(BASE_ENV)}`] : BASE_ENV),
      ...(opts.env ?? []),
    ];
    const ns = [
      `--mount=/proc/${this.pid}/ns/mnt`,
      `--pid=/proc/${this.pid}/ns/pid_for_children`,
      `--net=/proc/${this.pid}/ns/net`,
    ];
    const child = spawn("nsenter", [...ns, "--", "env", "-i", "-C", opts.cwd ?? "/workspace", ...env, ...as, ...argv], {
      stdio: ["pipe", "pipe", "pipe"],
      ...OUTSIDE,
    });
    return attached(child, onData);
  }
}

/** A child process as an Attached: stdout and stderr in arrival order, stdin with backpressure. */
function attached(child: ChildProcess, onData: (chunk: Buffer, stream: 1 | 2) => void): Attached {
  let alive = true;
  const stdin = child.stdin!;
  stdin.on("error", () => {}); // a process that exited without reading it
  child.stdout!.on("data", (b: Buffer) => onData(b, 1));
  child.stderr!.on("data", (b: Buffer) => onData(b, 2));
  const exit = new Promise<number>((r) => child.once("close", (code, signal) => r(code ?? (signal ? 128 + 9 : -1))));
  let dropped!: () => void; // destroy(): the caller is done with it, as when Docker's stream is closed
  const ended = Promise.race([exit, new Promise<void>((r) => (dropped = r))]).then(() => void (alive = false));
  child.once("error", () => (alive = false));
  const send = async (data: Buffer) => {
    if (!alive || stdin.destroyed || stdin.write(data)) return;
    await new Promise<void>((r) => {
      const go = () => (stdin.off("drain", go), stdin.off("close", go), child.off("close", go), r());
      stdin.once("drain", go);
      stdin.once("close", go);
      child.once("close", go);
    });
  };
  return {
    write: (data) => void (alive && !stdin.destroyed && stdin.write(data)),
    send,
    endInput: () => stdin.end(),
    pipeIn: (source) =>
      pipeGathered(
        source,
        send,
        () => alive,
        () => stdin.end(),
      ),
    ended,
    get alive() {
      return alive;
    },
    pause: () => (child.stdout!.pause(), child.stderr!.pause()),
    resume: () => (child.stdout!.resume(), child.stderr!.resume()),
    destroy: () => {
      alive = false;
      dropped();
      stdin.destroy();
      child.stdout!.destroy();
      child.stderr!.destroy();
    },
    exitCode: () => exit,
  };
}
