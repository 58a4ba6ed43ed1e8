// The sandbox's side of setup-phase egress. The container keeps NetworkMode none; the worker's
// proxy socket lives in a per-job host directory bind-mounted read-only at create time (a mount
// cannot be added later), and a small root process in the container bridges a loopback port to
// it for as long as setup runs. Closing the bridge's stdin ends it; the agent (uid 1000) can
// neither signal it nor connect to the socket itself (mode 0600, root's).
import { asset } from "../core/assets.js";
import type { Attached, Box, BoxSpec } from "../backend/types.js";
import { kinded } from "../core/errors.js";

/** Where the per-job directory appears in the container. */
export const EGRESS_MOUNT = "/patchbay-egress";
export const EGRESS_SOCKET = `${EGRESS_MOUNT}/proxy.sock`;

export function egressMount(hostDir: string): NonNullable<BoxSpec["mounts"]>[number] {
  return { source: hostDir, target: EGRESS_MOUNT };
}

const BRIDGE = asset("sandbox/py/egress_bridge.py");

export class EgressBridgeError extends kinded("setup") {}

/** The running bridge: `port` is its loopback port in the container. */
export interface EgressBridge {
  port: number;
  stop(): Promise<void>;
}

export async function startEgressBridge(box: Box, maxConnections: number): Promise<EgressBridge> {
  let out = "";
  let proc: Attached | undefined;
  const first = new Promise<string>((resolve) => {
    void box
      .attach(
        ["python3", "-I", "-S", "-c", BRIDGE, EGRESS_SOCKET, String(maxConnections)],
        (chunk) => {
          if (out.length > 4096) return; // its first line is all that is read: what it prints after is dropped
          out += chunk.toString("utf8");
          if (out.includes("\n") || out.length > 4096) resolve(out);
        },
        { user: "0:0", cwd: "/" },
      )
      .then(
        (p) => {
          proc = p;
          void p.ended.then(() => resolve(out));
        },
        (err: Error) => resolve(`error ${err.message}\n`),
      );
  });
  const line = (await first).split("\n")[0] ?? "";
  const m = /^port (\d+)$/.exec(line);
  const stop = async () => {
    if (!proc) return;
    proc.endInput();
    const ended = await Promise.race([
      proc.ended.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 5000).unref()),
    ]);
    if (!ended) proc.destroy();
    await proc.ended;
  };
  if (!m) {
    await stop();
    throw new EgressBridgeError(
      `the setup network bridge could not start: ${line.replace(/^error /, "") || "no output"}`,
    );
  }
  return { port: Number(m[1]), stop };
}
