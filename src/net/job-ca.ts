// A job's own certificate authority, for the egress proxy's terminated tunnels (src/net/terminate.ts):
// the proxy ends TLS for a host with a credential and shows the sandbox a certificate for exactly
// that name, signed here. The CA is made per job in the worker's memory (ECDSA P-256 through Node's
// webcrypto, its private key not extractable: never written anywhere, gone with the job), lives
// 2 days at most, and carries a critical Name Constraints extension that permits only the job's
// credential hosts and excludes every IP address: even a leaked ca.pem lets no one (not patchbay
// either) make a certificate the sandbox would trust for another name. A dNSName constraint also
// admits names below it (RFC 5280 §4.2.1.10); this code signs only the exact hosts it was given.
// @peculiar/x509 is an optional package (OPTIONAL.credentials), loaded on first use.
import { createPrivateKey, randomBytes, webcrypto } from "node:crypto";
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import tls from "node:tls";
import { normalizeHost } from "../core/allow.js";
import { kinded } from "../core/errors.js";
import { loadOptional, OPTIONAL } from "../core/optional.js";

type X509 = typeof import("@peculiar/x509");

/** A leaf certificate and its private key, PEM, for a TLS server. */
export interface LeafCert {
  key: string;
  cert: string;
}

/** A job's CA: leaves for its credential hosts only, and its certificate for the sandbox to trust. */
export interface JobCa {
  /** The CA's certificate, PEM (what the sandbox trusts during setup). */
  readonly caPem: string;
  /** A certificate for exactly `host` (one of the CA's hosts), made once and cached. */
  leaf(host: string): Promise<LeafCert>;
}

/** A leaf asked for a name the CA was not made for. */
export class JobCaError extends kinded("config") {}

const P256 = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGN = { name: "ECDSA", hash: "SHA-256" } as const;
const HOUR = 3600_000;
const crypto = webcrypto as unknown as Crypto;

/**
 * tsyringe (which @peculiar/x509 uses for its algorithm registry) wants a Reflect metadata API.
 * The library's classes declare no constructor parameters, so a small store keyed by target and
 * key is all it needs; it is installed only when no polyfill (reflect-metadata) is present.
 */
function reflectMetadataShim(): void {
  const R = Reflect as unknown as Record<string, unknown>;
  if (typeof R.getMetadata === "function") return;
  const store = new WeakMap<object, Map<unknown, unknown>>();
  const own = (k: unknown, t: object) => store.get(t)?.get(k);
  const get = (k: unknown, t: object | null): unknown => {
    for (let o = t; o; o = Object.getPrototypeOf(o) as object | null) if (store.get(o)?.has(k)) return own(k, o);
    return undefined;
  };
  const define = (k: unknown, v: unknown, t: object) => {
    if (!store.has(t)) store.set(t, new Map());
    store.get(t)!.set(k, v);
  };
  Object.assign(Reflect, { getMetadata: get, getOwnMetadata: own, defineMetadata: define });
}

let loaded: Promise<X509> | undefined;
function x509(): Promise<X509> {
  reflectMetadataShim();
  loaded ??= loadOptional(OPTIONAL.credentials, () => import("@peculiar/x509"));
  return loaded;
}

/** DER: a tag and its content, with the length in definite form. */
function der(tag: number, content: Uint8Array): Uint8Array<ArrayBuffer> {
  const n = content.length;
  const len = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Uint8Array.from([tag, ...len, ...content]);
}
const cat = (parts: Uint8Array[]): Uint8Array<ArrayBuffer> => Uint8Array.from(parts.flatMap((p) => [...p]));

/**
 * NameConstraints (RFC 5280 §4.2.1.10): permitted dNSName subtrees for `hosts`, excluded
 * iPAddress subtrees 0.0.0.0/0 and ::/0 (without them IP names would be unconstrained).
 */
export function nameConstraints(hosts: readonly string[]): Uint8Array<ArrayBuffer> {
  const subtree = (name: Uint8Array) => der(0x30, name);
  const permitted = hosts.map((h) => subtree(der(0x82, new TextEncoder().encode(h))));
  const excluded = [8, 32].map((n) => subtree(der(0x87, new Uint8Array(n))));
  return der(0x30, cat([der(0xa0, cat(permitted)), der(0xa1, cat(excluded))]));
}

/** Makes a job's CA for these hosts (normalized, at least one). Throws MissingPackageError without @peculiar/x509. */
export async function createJobCa(hosts: readonly string[]): Promise<JobCa> {
  const bad = hosts.find((h) => !normalizeHost(h));
  if (bad !== undefined || !hosts.length)
    throw new JobCaError(`a job CA needs host names: ${bad === undefined ? "none given" : JSON.stringify(bad)}`);
  const names = [...new Set(hosts.map((h) => normalizeHost(h)!))];
  const x = await x509();
  const keys = await crypto.subtle.generateKey(P256, false, ["sign", "verify"]);
  const notBefore = new Date(Date.now() - HOUR);
  const notAfter = new Date(Date.now() + 48 * HOUR);
  const ca = await x.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial(),
      name: `CN=patchbay job CA ${randomBytes(6).toString("hex")}`,
      notBefore,
      notAfter,
      keys,
      signingAlgorithm: SIGN,
      extensions: [
        new x.BasicConstraintsExtension(true, 0, true),
        new x.KeyUsagesExtension(x.KeyUsageFlags.keyCertSign | x.KeyUsageFlags.cRLSign, true),
        new x.Extension("2.5.29.30", true, nameConstraints(names)),
        await x.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  const leaves = new Map<string, Promise<LeafCert>>();
  const make = async (host: string): Promise<LeafCert> => {
    const pair = await crypto.subtle.generateKey(P256, true, ["sign", "verify"]);
    const cert = await x.X509CertificateGenerator.create(
      {
        serialNumber: serial(),
        subject: `CN=${host}`,
        issuer: ca.subject,
        notBefore,
        notAfter,
        publicKey: pair.publicKey,
        signingKey: keys.privateKey,
        signingAlgorithm: SIGN,
        extensions: [
          new x.BasicConstraintsExtension(false, undefined, true),
          new x.KeyUsagesExtension(x.KeyUsageFlags.digitalSignature, true),
          new x.ExtendedKeyUsageExtension([x.ExtendedKeyUsage.serverAuth]),
          new x.SubjectAlternativeNameExtension([{ type: "dns", value: host }]),
          await x.AuthorityKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        ],
      },
      crypto,
    );
    const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
    const key = createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" }).export({ format: "pem", type: "pkcs8" });
    return { key: key.toString(), cert: cert.toString("pem") };
  };
  return {
    caPem: ca.toString("pem"),
    leaf(host: string): Promise<LeafCert> {
      const name = normalizeHost(host);
      if (!name || !names.includes(name))
        return Promise.reject(new JobCaError(`the job CA signs only for its credential hosts, not ${host}`));
      let p = leaves.get(name);
      if (!p) leaves.set(name, (p = make(name)));
      return p;
    },
  };
}

/** A random positive 128-bit serial number, hex (its top bit clear: DER integers are signed). */
function serial(): string {
  const b = randomBytes(16);
  b[0] = b[0]! & 0x7f;
  return b.toString("hex");
}

/**
 * Writes a CA's certificate into an egress session's directory, alone (`ca.pem`) and after the
 * system's roots (`ca-bundle.pem`), for setup's tools to trust. Setup runs as uid 1000 in the
 * sandbox, which sees this directory (the mount's root) with its host mode: it becomes 0755 and
 * the files 0644, while the socket stays 0600 (connecting needs write permission on it: only root
 * in the sandbox can). On the host the base directory above stays 0700, so no other user reaches
 * any of it. No file holds a key.
 */
export async function writeCaFiles(dir: string, caPem: string): Promise<void> {
  const write = async (name: string, text: string) => {
    await writeFile(join(dir, name), text, { mode: 0o644, flag: "wx" });
    await chmod(join(dir, name), 0o644);
  };
  await write("ca.pem", caPem);
  await write("ca-bundle.pem", `${tls.rootCertificates.join("\n")}\n${caPem}`);
  await chmod(dir, 0o755);
}
