// The setup phase of a job: the repo's own commands (`npm ci`, `pip install -e .`) run in the
// sandbox. They get network only when the JobSpec allows hosts for setup, and then only through the
// worker's egress proxy. When setup ends, the worker takes the path out away: it stops the bridge
// in the box, closes the job's listener with every connection it had, and removes the socket and
// its directory.
import type { Config } from "../core/config/config.js";
import { parseAllowEntry, type AllowRule } from "../core/allow.js";
import { expandPresets, PresetError } from "../net/presets.js";
import { EgressProxy, type EgressSession } from "../net/proxy.js";
import { EGRESS_MOUNT, egressMount, EgressBridgeError, type EgressBridge } from "../sandbox/egress.js";
import { credentialsFor } from "./credentials.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { EventInput, JobSpec } from "../core/spec/spec.js";
import { kinded } from "../core/errors.js";

/** A setup command failed (or its network could not be provided): the job fails without a retry. */
export class SetupError extends kinded("setup") {}

let shared: EgressProxy | undefined;
/** The worker's proxy (one per process, in config.egressDir as the first job found it; sessions are per job). */
export function defaultEgressProxy(baseDir: string | undefined): EgressProxy {
  shared ??= new EgressProxy({ baseDir });
  return shared;
}

/**
 * The job's egress session when its spec allows setup network, made before the sandbox (whose
 * mounts are fixed at create time). Presets are read from the worker's tool configuration.
 */
export async function prepareEgress(
  spec: JobSpec,
  proxy: EgressProxy | undefined,
  emit: (e: EventInput) => void,
  config: Pick<Config, "egressDir" | "hostEnv" | "pip" | "egressCredentials">,
): Promise<EgressSession | undefined> {
  const allow = spec.network?.setup?.allow;
  if (!allow) return undefined;
  const credentials = credentialsFor(spec, config); // checked by the policy already: names and hosts
  let hosts: string[];
  try {
    hosts = await expandPresets(allow, config);
  } catch (err) {
    if (err instanceof PresetError) throw new SetupError(err.message);
    throw err;
  }
  const rules = hosts.map((h) => parseAllowEntry(h)).filter((r): r is AllowRule => typeof r !== "string");
  return (proxy ?? defaultEgressProxy(config.egressDir)).session(
    rules,
    (r) => emit({ type: "egress", ...r }),
    credentials,
  );
}

export const mountsFor = (session: EgressSession | undefined) => (session ? [egressMount(session.dir)] : undefined);

const tail = (s: string, n = 2000) => (s.length > n ? `…${s.slice(-n)}` : s);
const PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/**
 * Where setup's tools look for the certificates they trust, each pointed at the job's files when
 * the proxy adds credentials: the proxy answers for a credential's host with a certificate of the
 * job's own CA. Node adds `ca.pem` to its own roots; the others replace theirs with the bundle
 * (Node's roots and the job's CA), npm's `cafile` through its environment form.
 */
function trustVars(egress: EgressSession): Record<string, string> {
  if (!egress.caPath || !egress.caBundlePath) return {};
  const ca = `${EGRESS_MOUNT}/${egress.caPath}`;
  const bundle = `${EGRESS_MOUNT}/${egress.caBundlePath}`;
  return {
    NODE_EXTRA_CA_CERTS: ca,
    SSL_CERT_FILE: bundle,
    REQUESTS_CA_BUNDLE: bundle,
    PIP_CERT: bundle,
    GIT_SSL_CAINFO: bundle,
    CURL_CA_BUNDLE: bundle,
    npm_config_cafile: bundle,
  };
}

/** Every variable setup's network sets, unset when setup ends. */
const NETWORK_VARS = [
  ...PROXY_VARS,
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "REQUESTS_CA_BUNDLE",
  "PIP_CERT",
  "GIT_SSL_CAINFO",
  "CURL_CA_BUNDLE",
  "npm_config_cafile",
];

export interface SetupOptions {
  timeoutSec: number;
  signal: AbortSignal;
  emit: (e: EventInput) => void;
  egress?: EgressSession;
  /** The bridge started early by startSetupNetwork (while the repo loads); else it starts here. */
  network?: Promise<EgressBridge>;
  /** Loopback port of the bridge, for tests of its removal. */
  onBridge?: (port: number) => void;
}

/**
 * Opens the job's listener and starts the bridge (about 0.5 s, mostly the exec), so runJob can do it
 * while the repo loads: nothing untrusted runs in the sandbox before setup, and the socket admits
 * only root. Undefined without setup network.
 */
export function startSetupNetwork(
  sandbox: Sandbox,
  egress: EgressSession | undefined,
): Promise<EgressBridge> | undefined {
  if (!egress) return undefined;
  const started = (async () => {
    await egress.listen();
    try {
      return await sandbox.bridgeEgress(egress.limits.maxConnections);
    } catch (err) {
      if (err instanceof EgressBridgeError)
        throw new SetupError(`${err.message} (under gVisor the runtime needs --host-uds=open)`);
      throw err;
    }
  })();
  started.catch(() => {}); // awaited by runSetup; a job that fails before setup has no use for it
  return started;
}

/** Runs the setup commands; resolves to a message when the job was stopped (timeout, cancel) meanwhile. */
export async function runSetup(sandbox: Sandbox, commands: string[], o: SetupOptions): Promise<string | undefined> {
  let bridge: EgressBridge | undefined;
  try {
    if (o.egress) {
      bridge = await (o.network ?? startSetupNetwork(sandbox, o.egress)!);
      o.onBridge?.(bridge.port);
      const url = `http://127.0.0.1:${bridge.port}`;
      const vars = { ...Object.fromEntries(PROXY_VARS.map((v) => [v, url])), ...trustVars(o.egress) };
      const assigned = Object.entries(vars).map(([k, v]) => `${k}=${v}`);
      await sandbox.shell.run(`export ${assigned.join(" ")}; unset NO_PROXY no_proxy`, { timeoutSec: 30 });
    }
    for (const command of commands) {
      const t = performance.now();
      // The shell throws only where the sandbox itself misbehaves (a kill whose targets outlived it,
      // a supervisor that died under it): while its container runs, that is the setup's doing.
      const r = await sandbox.shell
        .run(command, { timeoutSec: o.timeoutSec, signal: o.signal })
        .catch(async (err: Error) => {
          throw (await sandbox.running()) ? new SetupError(`setup command ${command}: ${err.message}`) : err;
        });
      o.emit({
        type: "setup",
        command,
        exitCode: r.exitCode,
        outputTail: tail(r.output),
        ms: Math.round(performance.now() - t),
      });
      if (o.signal.aborted) return `the job was stopped during setup: ${command}`;
      if (r.exitCode !== 0)
        throw new SetupError(
          `setup command failed (exit ${r.exitCode}): ${command}${refusalNote(o.egress)}\n${tail(r.output, 600)}`,
        );
    }
    return undefined;
  } finally {
    await closeEgress(sandbox, bridge, o.egress);
  }
}

function refusalNote(egress: EgressSession | undefined): string {
  if (!egress) return '\n(setup had no network: allow hosts with network.setup.allow, e.g. ["npm"])';
  if (!egress.refusals.size) return "";
  return `\nrefused by the egress proxy: ${[...egress.refusals].slice(0, 5).join("; ")}`;
}

/** Ends the path out: the bridge, then the listener and its connections, the socket, the variables. */
async function closeEgress(
  sandbox: Sandbox,
  bridge: EgressBridge | undefined,
  egress: EgressSession | undefined,
): Promise<void> {
  if (!egress) return;
  await bridge?.stop();
  await egress.close();
  await sandbox.shell.run(`unset ${NETWORK_VARS.join(" ")}`, { timeoutSec: 30 }).catch(() => undefined);
}
