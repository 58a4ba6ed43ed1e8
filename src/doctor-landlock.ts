// `patchbay doctor`'s Landlock check. The sandbox's helper (src/sandbox/py/helper.py) puts every
// process it starts as the agent into a Landlock domain of its own, so that none of a job's
// processes can read or write another's memory or environment through /proc; where the kernel has
// no Landlock they start without one. Whether the boxes get it is the kernel's (the engine's
// host's) to say, so one throwaway box of the image asks it, as the agent, under the boxes' own
// profile: landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION prints the ABI.
import { docker } from "./runtime/docker.js";
import type { EngineInfo } from "./runtime/engine.js";
import { LABEL } from "./runtime/owner.js";
import { seccompOption } from "./runtime/seccomp.js";
import { settleWithin } from "./timeout.js";

export interface LandlockCheck {
  name: string;
  ok: boolean;
  required: boolean;
  detail: string;
  fix?: string;
}

// Prints LANDLOCK= and the Landlock ABI (>= 1), or the negated errno (ENOSYS -38, EOPNOTSUPP -95), or "arch" on
// an architecture the helper has no syscall number for.
const PROBE = [
  "import ctypes, os",
  "nr = {'x86_64': 444, 'aarch64': 444}.get(os.uname().machine)",
  "libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long",
  "r = libc.syscall(ctypes.c_long(nr), None, ctypes.c_long(0), ctypes.c_long(1)) if nr else None",
  "print('LANDLOCK=%s' % ('arch' if r is None else r if r >= 0 else -ctypes.get_errno()))",
].join("\n");

const NO = "no: a job's processes can read each other's memory through /proc";

/** What the probe printed, said as the doctor's line. */
export function landlockDetail(printed: string): { ok: boolean; detail: string } {
  const v = printed.trim();
  if (/^[1-9]\d*$/.test(v)) return { ok: true, detail: `landlock: yes (ABI ${v})` };
  const why = v === "-38" ? "the kernel has no Landlock (ENOSYS)" : v === "-95" ? "Landlock is disabled in the kernel (EOPNOTSUPP; add it to lsm=)" : v === "arch" ? "an architecture the helper has no Landlock syscall number for" : `the probe said ${JSON.stringify(v.slice(0, 200))}`;
  return { ok: false, detail: `landlock: ${NO} (${why})` };
}

/** One throwaway box of `image` (the default runtime) asks the kernel for its Landlock ABI. */
export async function landlockCheck(image: string, engine: EngineInfo | undefined): Promise<LandlockCheck> {
  const name = "landlock";
  const fix = "run the workers on a Linux kernel with Landlock enabled (5.13 or later, `landlock` in /sys/kernel/security/lsm); gVisor (runtime: runsc) has none";
  let container: Awaited<ReturnType<ReturnType<typeof docker>["createContainer"]>> | undefined;
  try {
    container = await docker().createContainer({
      Image: image, Entrypoint: [], Cmd: ["python3", "-I", "-S", "-c", PROBE], User: "1000:1000", NetworkDisabled: true,
      Labels: { [LABEL.managed]: "1", [LABEL.deadline]: String(Math.floor(Date.now() / 1000) + 300) },
      HostConfig: { NetworkMode: "none", ReadonlyRootfs: true, CapDrop: ["ALL"], SecurityOpt: ["no-new-privileges", seccompOption(engine?.name ?? "docker")], PidsLimit: 64 },
    });
    await container.start();
    const waited = await settleWithin(container.wait() as Promise<{ StatusCode: number }>, 30_000);
    if (!waited) return { name, ok: false, required: false, detail: `landlock: unknown (a box did not answer within 30 s)`, fix };
    const logs = (await container.logs({ stdout: true, stderr: true })).toString("latin1");
    const said = landlockDetail(/LANDLOCK=(\S+)/.exec(logs)?.[1] ?? `exit ${waited.StatusCode}: ${logs.replace(/[^\x20-\x7e\n]/g, "")}`);
    return { name, required: false, ...said, ...(said.ok ? {} : { fix }) };
  } catch (err) {
    return { name, ok: false, required: false, detail: `landlock: unknown (a box could not run: ${(err as Error).message})`, fix };
  } finally {
    await container?.remove({ force: true }).catch(() => {});
  }
}
