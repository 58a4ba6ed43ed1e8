// `patchbay doctor`: what is there and what to do about what is not.
import type { Config } from "../core/config/config.js";
import { platformCredentials } from "../core/config/provider.js";
import { AGENT_UID } from "../backend/agent-user.js";
import { docker } from "../backend/docker.js";
import { describeEngine, engineInfo, limitsProblem, runscSeccomp, type EngineInfo } from "../backend/engine.js";
import { LABEL } from "../backend/owner.js";
import { seccompOption } from "../backend/seccomp.js";
import { imageRecipe, recipeHash } from "../sandbox/image.js";
import { settleWithin } from "../core/timeout.js";
import { redisChecks } from "./doctor-redis.js";

export interface Check {
  name: string;
  ok: boolean;
  required: boolean;
  detail: string;
  fix?: string;
}

export interface DoctorOptions {
  /** Redis to check; default $REDIS_URL. */
  redisUrl?: string;
}

export async function doctor(config: Config, opts: DoctorOptions = {}): Promise<Check[]> {
  const redisUrl = opts.redisUrl ?? config.redisUrl;
  const checks: Check[] = [];
  // The engine's /info, of which only these fields are read (dockerode types it as any).
  type Info = { ServerVersion?: string; Runtimes?: Record<string, unknown> };
  let info: Info | undefined;
  let engine: EngineInfo | undefined;
  try {
    info = (await docker().info()) as Info;
    engine = await engineInfo(docker());
    checks.push({
      name: "engine",
      ok: true,
      required: true,
      detail: `${describeEngine(engine, AGENT_UID)} at ${config.engine.host ?? "the default socket"}`,
    });
    const limits = limitsProblem(engine);
    checks.push({
      name: "limits",
      ok: !limits,
      required: true,
      detail: limits ?? "the engine holds every sandbox to its memory, pids and cpu limits",
      ...(limits ? { fix: "see docs/rootless.md" } : {}),
    });
  } catch (err) {
    checks.push({
      name: "engine",
      ok: false,
      required: true,
      detail: (err as Error).message,
      fix: "run `npm run services` (Debian, root) or start Docker / set DOCKER_HOST",
    });
  }
  checks.push(...(await redisChecks(redisUrl, config)));
  if (info) {
    const recipe = await imageRecipe(config.image);
    checks.push(
      recipe === undefined
        ? {
            name: "image",
            ok: false,
            required: true,
            detail: `${config.image} is missing`,
            fix: "run `npx patchbay image build`",
          }
        : {
            name: "image",
            ok: true,
            required: true,
            detail: `${config.image}${recipe === recipeHash() ? "" : " (built from an older recipe; `npx patchbay image build` updates it)"}`,
          },
    );
    // Podman lists runtimes it knows of, installed or not, and patchbay runs no gVisor under it.
    const runsc = Boolean(info.Runtimes?.runsc) && engine?.name !== "podman";
    if (engine?.name === "podman")
      checks.push({
        name: "gvisor",
        ok: false,
        required: false,
        detail: "not under Podman (jobs with runtime: runsc are handed to another worker)",
        fix: "run gVisor jobs on workers with a Docker engine that registers runsc",
      });
    else checks.push(gvisorCheck(runsc, engine));
    if (runsc && recipe !== undefined) checks.push(await gvisorStatx(config.image));
    if (recipe !== undefined) checks.push(await landlockCheck(config.image, engine));
  }
  checks.push(ptraceCheck(config));
  checks.push(modelCheck(config));
  checks.push(credentialsCheck(config));
  return checks;
}

/** The credentials the egress proxy may add (PATCHBAY_EGRESS_CREDENTIALS): names, hosts and headers, never a value. */
export function credentialsCheck(config: Pick<Config, "egressCredentials">): Check {
  const list = [...config.egressCredentials.values()];
  return {
    name: "egress credentials",
    ok: true,
    required: false,
    detail: list.length
      ? list.map((c) => `${c.name} → ${c.host}:${c.port} (${c.header})`).join(", ")
      : "none (PATCHBAY_EGRESS_CREDENTIALS unset: a job naming network.setup.credentials is refused)",
  };
}

/** runsc registered, and whether with --oci-seccomp (without it gVisor ignores the boxes' seccomp profile). */
function gvisorCheck(runsc: boolean, engine: EngineInfo | undefined): Check {
  const fix =
    'apt-get install runsc and register it in /etc/docker/daemon.json with runtimeArgs ["--network=none", "--oci-seccomp"], then reload dockerd (kill -HUP); `bash scripts/services.sh` does both';
  if (!runsc)
    return {
      name: "gvisor",
      ok: false,
      required: false,
      detail: "runtime runsc not registered (jobs with runtime: runsc will fail)",
      fix,
    };
  if (engine && !runscSeccomp(engine))
    return {
      name: "gvisor",
      ok: true,
      required: false,
      detail:
        "runtime runsc registered, without --oci-seccomp (gVisor ignores the boxes' seccomp profile; its own ptrace rule still holds)",
      fix,
    };
  return { name: "gvisor", ok: true, required: false, detail: "runtime runsc registered, with --oci-seccomp" };
}

/** Whether the sandboxes' processes may trace each other (PATCHBAY_ALLOW_PTRACE). */
function ptraceCheck(config: Pick<Config, "policy">): Check {
  return config.policy.allowPtrace
    ? {
        name: "ptrace",
        ok: true,
        required: false,
        detail:
          "allowed in the sandboxes (PATCHBAY_ALLOW_PTRACE=1): any process of a job can read and drive the others; for trusted repos only",
      }
    : {
        name: "ptrace",
        ok: true,
        required: false,
        detail: "denied in every sandbox (seccomp: ptrace, process_vm_readv/writev and their relatives)",
      };
}

/** The model's provider and whether its credentials are found: where they come from, never their values. */
export function modelCheck(
  config: Pick<Config, "anthropicApiKey" | "anthropicAuthToken" | "anthropicBaseUrl" | "provider" | "scripted">,
): Check {
  // A scripted model (PATCHBAY_MODEL=scripted:FILE) reaches no API: the key is not needed, nor looked for.
  if (config.scripted)
    return {
      name: "model",
      ok: true,
      required: false,
      detail: `scripted (${config.scripted.name}, from ${config.scripted.file}): no API key needed, nothing priced`,
    };
  const p = config.provider;
  if (p.name !== "anthropic") {
    const creds = platformCredentials(p);
    const fix =
      p.name === "bedrock"
        ? "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE with ~/.aws/credentials, or AWS_BEARER_TOKEN_BEDROCK where the worker runs (on EC2 an instance role also works, which this check cannot see)"
        : "set CLOUD_ML_REGION and GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login` (on Google Cloud the metadata server also works, which this check cannot see)";
    return { name: `provider ${p.name}`, ok: creds.found, required: false, detail: creds.detail, fix };
  }
  const key = Boolean(config.anthropicApiKey);
  return {
    name: "anthropic",
    ok: key || Boolean(config.anthropicAuthToken) || Boolean(config.anthropicBaseUrl),
    required: false,
    detail: key
      ? "ANTHROPIC_API_KEY is set"
      : config.anthropicAuthToken
        ? "ANTHROPIC_AUTH_TOKEN is set"
        : config.anthropicBaseUrl
          ? `no key; ANTHROPIC_BASE_URL=${config.anthropicBaseUrl}`
          : "ANTHROPIC_API_KEY is not set",
    fix: "export ANTHROPIC_API_KEY=... (workers need it; the client commands do not), or PATCHBAY_PROVIDER=bedrock|vertex",
  };
}

/**
 * Whether coreutils' `stat` works under runsc. The gVisor Debian 12 ships (20221219) refuses statx
 * with AT_NO_AUTOMOUNT, which coreutils 9 uses: the agent's `ls PATH`, `ls -l` and `stat` then fail
 * with "Invalid argument" under runsc (patchbay's own steps avoid them). One throwaway container.
 */
async function gvisorStatx(image: string): Promise<Check> {
  const name = "gvisor statx";
  const fix =
    "install a newer gVisor (runsc); patchbay's own steps do not need it, the agent's `ls PATH` and `stat` do";
  let container: Awaited<ReturnType<ReturnType<typeof docker>["createContainer"]>> | undefined;
  try {
    container = await docker().createContainer({
      Image: image,
      Entrypoint: [],
      Cmd: ["stat", "-c", "%n", "/"],
      User: "1000:1000",
      NetworkDisabled: true,
      Labels: { [LABEL.managed]: "1", [LABEL.deadline]: String(Math.floor(Date.now() / 1000) + 300) },
      HostConfig: {
        Runtime: "runsc",
        NetworkMode: "none",
        ReadonlyRootfs: true,
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges"],
        PidsLimit: 256,
      },
    });
    await container.start();
    const waited = await settleWithin(container.wait() as Promise<{ StatusCode: number }>, 30_000);
    if (!waited)
      return {
        name,
        ok: false,
        required: false,
        detail: "a container under runsc did not finish `stat /` within 30 s",
        fix,
      };
    if (waited.StatusCode === 0)
      return { name, ok: true, required: false, detail: "coreutils' stat (statx) works under runsc" };
    const out = (await container.logs({ stdout: true, stderr: true })).toString("latin1");
    const refused = /Invalid argument/.test(out);
    return {
      name,
      ok: false,
      required: false,
      detail: refused
        ? 'under runsc, coreutils\' `stat`, `ls PATH` and `ls -l` fail with "Invalid argument": this gVisor refuses statx with AT_NO_AUTOMOUNT'
        : `\`stat /\` under runsc exited ${waited.StatusCode}`,
      fix,
    };
  } catch (err) {
    return {
      name,
      ok: false,
      required: false,
      detail: `a container under runsc could not run: ${(err as Error).message}`,
      fix,
    };
  } finally {
    await container?.remove({ force: true }).catch(() => {});
  }
}

// Landlock: the sandbox's helper (src/sandbox/py/helper.py) puts every process it starts as the
// agent into a Landlock domain of its own, so that none of a job's processes can read or write
// another's memory or environment through /proc; where the kernel has no Landlock they start
// without one. Whether the boxes get it is the kernel's (the engine's host's) to say, so one
// throwaway box of the image asks it, as the agent, under the boxes' own profile:
// landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION gives the ABI.
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
  const why =
    v === "-38"
      ? "the kernel has no Landlock (ENOSYS)"
      : v === "-95"
        ? "Landlock is disabled in the kernel (EOPNOTSUPP; add it to lsm=)"
        : v === "arch"
          ? "an architecture the helper has no Landlock syscall number for"
          : `the probe said ${JSON.stringify(v.slice(0, 200))}`;
  return { ok: false, detail: `landlock: ${NO} (${why})` };
}

/** One throwaway box of `image` (the default runtime) asks the kernel for its Landlock ABI. */
export async function landlockCheck(image: string, engine: EngineInfo | undefined): Promise<Check> {
  const name = "landlock";
  const fix =
    "run the workers on a Linux kernel with Landlock enabled (5.13 or later, `landlock` in /sys/kernel/security/lsm); gVisor (runtime: runsc) has none";
  let container: Awaited<ReturnType<ReturnType<typeof docker>["createContainer"]>> | undefined;
  try {
    container = await docker().createContainer({
      Image: image,
      Entrypoint: [],
      Cmd: ["python3", "-I", "-S", "-c", PROBE],
      User: "1000:1000",
      NetworkDisabled: true,
      Labels: { [LABEL.managed]: "1", [LABEL.deadline]: String(Math.floor(Date.now() / 1000) + 300) },
      HostConfig: {
        NetworkMode: "none",
        ReadonlyRootfs: true,
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges", seccompOption(engine?.name ?? "docker")],
        PidsLimit: 64,
      },
    });
    await container.start();
    const waited = await settleWithin(container.wait() as Promise<{ StatusCode: number }>, 30_000);
    if (!waited)
      return { name, ok: false, required: false, detail: `landlock: unknown (a box did not answer within 30 s)`, fix };
    const logs = (await container.logs({ stdout: true, stderr: true })).toString("latin1");
    const said = landlockDetail(
      /LANDLOCK=(\S+)/.exec(logs)?.[1] ?? `exit ${waited.StatusCode}: ${logs.replace(/[^\x20-\x7e\n]/g, "")}`,
    );
    return { name, required: false, ...said, ...(said.ok ? {} : { fix }) };
  } catch (err) {
    return {
      name,
      ok: false,
      required: false,
      detail: `landlock: unknown (a box could not run: ${(err as Error).message})`,
      fix,
    };
  } finally {
    await container?.remove({ force: true }).catch(() => {});
  }
}
