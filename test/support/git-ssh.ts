// A git server over SSH on 127.0.0.1: Debian's openssh-server (/usr/sbin/sshd) started in the
// foreground (-D -e) with a config, host key and authorized_keys of its own in a temp dir, and an
// ssh-agent holding the client key, so git authenticates as a user's would: through SSH_AUTH_SOCK.
// `env` is what to give git: the agent's socket and a GIT_SSH_COMMAND with the port, the temp dir's
// known_hosts (the host key pinned) and no prompt. Both daemons are ended by pid at close().
import { execFile, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
export const SSHD = "/usr/sbin/sshd";

export interface GitSsh {
  /** user@127.0.0.1 — append ":/abs/path/repo.git" for a repository's URL (the port is in GIT_SSH_COMMAND). */
  login: string;
  port: number;
  /** The environment for git: SSH_AUTH_SOCK, GIT_SSH_COMMAND. */
  env: Record<string, string>;
  /** sshd's log so far (-e: to stderr). */
  log(): string;
  close(): Promise<void>;
}

/** Lines from a child's stream until one matches (the daemon says it is ready); rejects if it exits first. */
function waitFor(
  child: ChildProcess,
  stream: NodeJS.ReadableStream,
  re: RegExp,
  seen: { text: string },
): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const onData = (c: Buffer) => {
      seen.text += c.toString("utf8");
      const m = re.exec(seen.text);
      if (m) {
        stream.off("data", onData);
        child.off("exit", onExit);
        resolve(m);
      }
    };
    const onExit = (code: number | null) =>
      reject(new Error(`${child.spawnfile} exited (${code}) before it was ready:\n${seen.text}`));
    stream.on("data", onData);
    child.once("exit", onExit);
  });
}

/** A port free on 127.0.0.1 now (sshd cannot report the one it took for port 0). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });

export async function startGitSsh(): Promise<GitSsh> {
  if (!fs.existsSync(SSHD))
    throw new Error(`${SSHD} is missing: apt-get install openssh-server (scripts/pretest.sh does)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pb-sshd-"));
  fs.chmodSync(dir, 0o700);
  const user = os.userInfo().username;
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "host_key")]);
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "patchbay-test", "-f", path.join(dir, "client_key")]);
  fs.copyFileSync(path.join(dir, "client_key.pub"), path.join(dir, "authorized_keys"));
  fs.chmodSync(path.join(dir, "authorized_keys"), 0o600);
  // sshd runs with privilege separation: Debian's package makes this directory at boot, not at install.
  if (process.getuid?.() === 0) fs.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  let sshd: ChildProcess | undefined;
  let port = 0;
  const seen = { text: "" };
  for (let attempt = 0; !sshd && attempt < 5; attempt++) {
    port = await freePort();
    const config = [
      `ListenAddress 127.0.0.1:${port}`,
      `HostKey ${path.join(dir, "host_key")}`,
      `AuthorizedKeysFile ${path.join(dir, "authorized_keys")}`,
      `AllowUsers ${user}`,
      "PermitRootLogin prohibit-password",
      "PubkeyAuthentication yes",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UsePAM no",
      // sshd checks every directory above authorized_keys up to the user's home, or to / when the
      // file is elsewhere: /tmp (mode 1777) fails that. The files themselves are 0600 in a 0700 dir.
      "StrictModes no",
      "PidFile none",
      "LogLevel VERBOSE",
      `Subsystem sftp internal-sftp`,
    ].join("\n");
    fs.writeFileSync(path.join(dir, "sshd_config"), `${config}\n`, { mode: 0o600 });
    const child = spawn(SSHD, ["-D", "-e", "-f", path.join(dir, "sshd_config")], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    seen.text = "";
    try {
      await waitFor(child, child.stderr, /Server listening on 127\.0\.0\.1 port (\d+)/, seen);
      sshd = child;
      child.stderr.on("data", (c: Buffer) => (seen.text = (seen.text + c.toString("utf8")).slice(-20_000)));
    } catch (err) {
      if (!/Address already in use/.test(seen.text)) throw err; // another process took the port: try another
    }
  }
  if (!sshd) throw new Error(`sshd did not start:\n${seen.text}`);
  const sock = path.join(dir, "agent.sock");
  const agent = spawn("ssh-agent", ["-D", "-a", sock], { stdio: ["ignore", "pipe", "pipe"] });
  await waitFor(agent, agent.stdout, /SSH_AUTH_SOCK=/, { text: "" }); // printed once the socket listens
  const hostKey = fs.readFileSync(path.join(dir, "host_key.pub"), "utf8").split(" ").slice(0, 2).join(" ");
  fs.writeFileSync(path.join(dir, "known_hosts"), `[127.0.0.1]:${port} ${hostKey}\n`);
  await run("ssh-add", ["-q", path.join(dir, "client_key")], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
  const ssh = [
    "ssh",
    "-F",
    "/dev/null",
    "-p",
    String(port),
    "-o",
    `UserKnownHostsFile=${path.join(dir, "known_hosts")}`,
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    "BatchMode=yes",
    "-o",
    "IdentitiesOnly=no",
  ];
  return {
    login: `${user}@127.0.0.1`,
    port,
    env: { SSH_AUTH_SOCK: sock, GIT_SSH_COMMAND: ssh.join(" ") },
    log: () => seen.text,
    close: async () => {
      await Promise.all([stop(sshd), stop(agent)]);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
