// The credentials the worker's egress proxy adds on the way out (PATCHBAY_EGRESS_CREDENTIALS;
// docs/operations.md, "The credentials file"). The operator's file, JSON or YAML, is read once when
// loadConfig runs: for each credential a name a JobSpec may give (network.setup.credentials), the
// one host and port it is for, how its header is made, and where its secret is (the worker's
// environment or a file of its own, never the file itself). The secrets are read here, checked,
// and kept only in the EgressCredential objects, which print and serialize without them. No error
// of this module shows a secret: each names the credential, the field and where it looked.
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { inspect } from "node:util";
import { parse as parseYaml, YAMLError } from "yaml";
import { z } from "zod";
import { isIpLiteral, normalizeHost } from "../allow.js";
import { count } from "../count.js";
import { suggest } from "../suggest.js";

/** One configured credential, as the proxy uses it. Its secret fields never leave the worker. */
export interface EgressCredential {
  /** Its name, which a JobSpec's network.setup.credentials gives. */
  readonly name: string;
  /** The host it is for, normalized (lower case, no trailing dot): exactly this name, no other. */
  readonly host: string;
  /** The port it is for (443 unless configured). */
  readonly port: number;
  /** The request header it sets, in lower case (e.g. "authorization"). */
  readonly header: string;
  /** The header's whole value (e.g. "Bearer <token>"): secret. */
  readonly value: string;
  /**
   * Every form of the secret to be cut from what comes back (the value, the raw token, a Basic
   * pair's base64): an upstream that echoes the header in a body never shows it to the sandbox.
   */
  readonly secrets: readonly string[];
  /** PEM certificates the upstream's chain must end in, in place of the system's (an internal registry's CA). */
  readonly ca?: string;
}

/** What a credential's name is (a JobSpec gives it): lower case, digits, `.`, `_`, `-`; at most 64. */
export const CREDENTIAL_NAME_RE = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** The shortest secret taken: a shorter one would match ordinary text where secrets are cut out. */
export const MIN_SECRET_CHARS = 8;

/** The variable that names the file. */
const KNOB = "PATCHBAY_EGRESS_CREDENTIALS";

// Headers the proxy could not add without breaking the connection or the request's routing:
// hop-by-hop ones (RFC 9110 7.6.1), the framing, the Host, and anything for a proxy.
const REFUSED_HEADERS = new Set([
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "expect",
]);
/** An HTTP field name (RFC 9110 5.6.2's token). */
const TOKEN_RE = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

const INLINE =
  "must be { env: NAME } or { file: /path }, not the secret itself: a secret is never written in this file (keep it in the worker's environment or in a file of its own)";

/** Where a secret is: a variable of the worker's environment, or a file (its trailing newline trimmed). */
const SecretRef = z
  .strictObject(
    {
      env: z
        .string()
        .regex(ENV_NAME_RE, { error: "must be an environment variable's name (A-Z a-z 0-9 _)" })
        .optional(),
      file: z.string().min(1, { error: "must be a file's path" }).optional(),
    },
    { error: (iss) => (typeof iss.input === "string" ? INLINE : "must be { env: NAME } or { file: /path }") },
  )
  .check((ctx) => {
    if ((ctx.value.env === undefined) === (ctx.value.file === undefined))
      ctx.issues.push({ code: "custom", message: "must give exactly one of env and file", input: "" });
  });
type SecretRef = z.infer<typeof SecretRef>;

const Credential = z
  .strictObject(
    {
      host: z.string({ error: "must be a host name" }),
      port: z.int({ error: "must be a whole number" }).min(1).max(65535, { error: "must be 1 to 65535" }).optional(),
      bearer: SecretRef.optional(),
      basic: z
        .strictObject(
          {
            username: z
              .string({ error: "must be a string" })
              .min(1, { error: "must not be empty" })
              .refine((u) => !u.includes(":") && !/[\x00-\x1f\x7f]/.test(u), {
                error: "must hold no colon and no control character (Basic authentication joins it to the password)",
              }),
            password: SecretRef,
          },
          { error: "must be { username, password: { env | file } }" },
        )
        .optional(),
      header: z
        .strictObject(
          { name: z.string({ error: "must be a header name" }), value: SecretRef },
          {
            error: "must be { name, value: { env | file } }",
          },
        )
        .optional(),
      ca: z.string().min(1, { error: "must be a PEM file's path" }).optional(),
    },
    { error: "must be a mapping (host, port, one of bearer, basic and header, ca)" },
  )
  .check((ctx) => {
    const schemes = (["bearer", "basic", "header"] as const).filter((k) => ctx.value[k] !== undefined);
    if (schemes.length !== 1)
      ctx.issues.push({
        code: "custom",
        message: `must have exactly one of bearer, basic and header (has ${schemes.length ? schemes.join(", ") : "none"})`,
        input: "",
      });
  });
type CredentialEntry = z.infer<typeof Credential>;

const CredentialsFile = z.strictObject(
  { credentials: z.record(z.string(), Credential, { error: "must be a mapping of names to credentials" }) },
  { error: "must be a mapping with one key, credentials" },
);

/** The keys a mapping at `path` takes (the file's, a credential's, basic's, header's or a secret's). */
function knownKeys(path: readonly string[]): readonly string[] {
  const last = path.at(-1);
  if (path.length === 0) return ["credentials"];
  if (path.length === 2) return ["host", "port", "bearer", "basic", "header", "ca"];
  if (last === "basic") return ["username", "password"];
  if (last === "header") return ["name", "value"];
  return ["env", "file"];
}

/**
 * Unknown keys, each shown only when it is a near miss of a known one ("hots": host): any other
 * may be a secret written where a key goes (`bearer: { ghp_… }`), so it is not shown at all.
 */
function unknownKeys(keys: readonly string[], path: readonly string[]): string {
  const known = knownKeys(path);
  return keys
    .map((k) => {
      const hint = suggest(k, known);
      return hint
        ? `unknown key ${JSON.stringify(k)} (did you mean "${hint}"?)`
        : `an unknown key (not shown: it may be a secret in the wrong place; the keys here are ${known.join(", ")})`;
    })
    .join("; ");
}

/** One issue as `field: message`, with the credential's name in front; never an input's value. */
function issueLine(iss: z.core.$ZodIssue): string {
  const [, name, ...rest] = iss.path.map(String);
  const where =
    name === undefined
      ? iss.path.length
        ? `${iss.path.join(".")}: `
        : ""
      : `credential ${JSON.stringify(name.slice(0, 70))}: `;
  const field = rest.length ? `${rest.join(".")}: ` : "";
  const message =
    // Zod's own words for a bound ("Too big: expected number to be <=65535") in ours.
    iss.code === "unrecognized_keys"
      ? unknownKeys(iss.keys, iss.path.map(String))
      : (iss.code === "too_small" || iss.code === "too_big") && /^Too /.test(iss.message)
        ? `must be ${iss.code === "too_small" ? "at least" : "at most"} ${String(iss.code === "too_small" ? iss.minimum : iss.maximum)}`
        : iss.message;
  return `${where}${field}${message}`;
}

/** The checks of one host: a name exactly, not a wildcard, an address or a host:port. */
function hostProblem(raw: string): string | undefined {
  if (raw.includes("*")) return "must be one exact host name, not a wildcard";
  if (/^[^:[\]]+:\d+$/.test(raw)) return "must be a host name alone (the port goes in port)";
  if (isIpLiteral(raw))
    return "must be a host name, not an IP address (the proxy checks the name the upstream's certificate gives)";
  return normalizeHost(raw) ? undefined : "must be a host name (letters, digits, dots and hyphens)";
}

/** Reads a secret from where it is; the string is the problem (never the secret itself). */
function readSecret(ref: SecretRef, env: NodeJS.ProcessEnv, base: string): { value: string } | string {
  let value: string;
  if (ref.env !== undefined) {
    const v = env[ref.env];
    if (v === undefined) return `${ref.env} is not set in the worker's environment`;
    value = v;
  } else {
    const path = resolve(base, ref.file!);
    try {
      value = readFileSync(path, "utf8").replace(/(\r?\n)+$/, "");
    } catch (err) {
      return `cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "unreadable"})`;
    }
  }
  const from = ref.env !== undefined ? `environment variable ${ref.env}` : `file ${resolve(base, ref.file!)}`;
  if (value === "") return `the ${from} is empty`;
  // A header cannot carry a control character (CR, LF would split it) or one past Latin-1.
  if (/[\x00-\x1f\x7f]|[^\x00-\xff]/.test(value))
    return `the ${from} holds a control character or one outside Latin-1, which no header can carry`;
  return { value };
}

/** The header's name, lower-cased, or the problem. */
function headerName(raw: string): string | { problem: string } {
  const name = raw.toLowerCase();
  if (!TOKEN_RE.test(name)) return { problem: "must be a header name (letters, digits and !#$%&'*+.^_`|~-)" };
  if (REFUSED_HEADERS.has(name) || name.startsWith("proxy-"))
    return {
      problem: `${JSON.stringify(name)} cannot be set by the proxy (hop-by-hop, framing, Host and Proxy-* headers are refused)`,
    };
  return name;
}

/** The header, its value and its secrets of one credential's scheme; a string is the problem. */
function schemeOf(
  c: CredentialEntry,
  env: NodeJS.ProcessEnv,
  base: string,
): { header: string; value: string; secrets: string[] } | string {
  if (c.bearer) {
    const s = readSecret(c.bearer, env, base);
    if (typeof s === "string") return `bearer: ${s}`;
    return { header: "authorization", value: `Bearer ${s.value}`, secrets: [`Bearer ${s.value}`, s.value] };
  }
  if (c.basic) {
    const s = readSecret(c.basic.password, env, base);
    if (typeof s === "string") return `basic.password: ${s}`;
    const pair = Buffer.from(`${c.basic.username}:${s.value}`, "utf8").toString("base64");
    return { header: "authorization", value: `Basic ${pair}`, secrets: [`Basic ${pair}`, s.value, pair] };
  }
  const h = c.header!;
  const name = headerName(h.name);
  if (typeof name !== "string") return `header.name: ${name.problem}`;
  const s = readSecret(h.value, env, base);
  if (typeof s === "string") return `header.value: ${s}`;
  return { header: name, value: s.value, secrets: [s.value] };
}

/** The PEM certificates of a CA file, each checked to parse; a string is the problem. */
function readCa(file: string): { pem: string } | string {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    return `ca: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? "unreadable"})`;
  }
  const certs = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (!certs.length) return `ca: ${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`;
  for (const [i, pem] of certs.entries()) {
    try {
      new X509Certificate(pem);
    } catch (err) {
      return `ca: certificate ${i + 1} of ${file} does not parse (${(err as Error).message})`;
    }
  }
  return { pem: `${certs.join("\n")}\n` };
}

/**
 * The credential as the proxy takes it, which a log line, util.inspect or JSON.stringify shows
 * without its value and secrets (the same object's fields are all there for the proxy to read).
 */
function sealed(c: EgressCredential): EgressCredential {
  const shown = {
    name: c.name,
    host: c.host,
    port: c.port,
    header: c.header,
    value: "(hidden)",
    secrets: `(${c.secrets.length} hidden)`,
    ...(c.ca !== undefined ? { ca: "(PEM)" } : {}),
  };
  Object.freeze(c.secrets);
  Object.defineProperty(c, "toJSON", { value: () => shown });
  Object.defineProperty(c, inspect.custom, { value: () => shown });
  return Object.freeze(c);
}

/** One credential made from its entry; a string is the problem (naming the field, never a secret). */
function credentialOf(
  name: string,
  c: CredentialEntry,
  env: NodeJS.ProcessEnv,
  base: string,
): EgressCredential | string {
  const hostWhy = hostProblem(c.host);
  if (hostWhy) return `host: ${hostWhy} (got ${JSON.stringify(c.host.slice(0, 100))})`;
  const scheme = schemeOf(c, env, base);
  if (typeof scheme === "string") return scheme;
  const secrets = [...new Set(scheme.secrets)];
  const short = secrets.find((s) => s.length < MIN_SECRET_CHARS);
  if (short !== undefined)
    return `the secret is too short to be one (${count(short.length, "character")}; at least ${MIN_SECRET_CHARS})`;
  const ca = c.ca === undefined ? undefined : readCa(resolve(base, c.ca));
  if (typeof ca === "string") return ca;
  return sealed({
    name,
    host: normalizeHost(c.host)!,
    port: c.port ?? 443,
    header: scheme.header,
    value: scheme.value,
    secrets,
    ...(ca ? { ca: ca.pem } : {}),
  });
}

/**
 * The file's text as data: YAML or JSON (YAML reads both); a SyntaxError is the problem. The YAML
 * library's own messages and warnings quote the file's lines, which may hold a secret written
 * where it should not be: only an error's code and position are shown, and no warning at all.
 */
function parseText(text: string): unknown {
  try {
    return parseYaml(text, { logLevel: "error" });
  } catch (err) {
    if (!(err instanceof YAMLError)) throw err;
    const at = err.linePos?.[0];
    return new SyntaxError(`not YAML or JSON (${err.code}${at ? ` at line ${at.line}, column ${at.col}` : ""})`);
  }
}

/** Problems of the whole file's credentials: names, then each credential, then two for one host:port. */
function credentialsOf(
  entries: Record<string, CredentialEntry>,
  env: NodeJS.ProcessEnv,
  base: string,
): Map<string, EgressCredential> | string[] {
  const problems: string[] = [];
  const out = new Map<string, EgressCredential>();
  const byTarget = new Map<string, string>();
  for (const [name, entry] of Object.entries(entries)) {
    if (!CREDENTIAL_NAME_RE.test(name)) {
      problems.push(
        `credential ${JSON.stringify(name.slice(0, 70))}: the name must be 1-64 characters from a-z 0-9 . _ -, starting with a letter or digit`,
      );
      continue;
    }
    const c = credentialOf(name, entry, env, base);
    if (typeof c === "string") {
      problems.push(`credential ${JSON.stringify(name)}: ${c}`);
      continue;
    }
    const target = `${c.host}:${c.port}`;
    const other = byTarget.get(target);
    if (other !== undefined)
      problems.push(`credentials "${other}" and "${name}" are both for ${target}: one credential per host and port`);
    byTarget.set(target, name);
    out.set(name, c);
  }
  return problems.length ? problems : out;
}

/**
 * The credentials of PATCHBAY_EGRESS_CREDENTIALS's file (`file`; unset: none), their secrets read
 * from `env` (loadConfig's environment) or their own files (a relative path is the credentials
 * file's directory's). Throws one error naming every problem: the credential, the field and where
 * it looked, never a secret.
 */
export function loadEgressCredentials(
  file: string | undefined,
  env: NodeJS.ProcessEnv,
): ReadonlyMap<string, EgressCredential> {
  if (file === undefined || file.trim() === "") return new Map();
  const path = resolve(file);
  const fail = (problems: readonly string[]): never => {
    throw new Error(`bad environment: ${KNOB} (${path}): ${problems.join("; ")}`);
  };
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    return fail([`cannot read it (${(err as NodeJS.ErrnoException).code ?? "unreadable"})`]);
  }
  const data = parseText(text);
  if (data instanceof SyntaxError) return fail([data.message]);
  const parsed = CredentialsFile.safeParse(data);
  if (!parsed.success) return fail([...new Set(parsed.error.issues.map(issueLine))]);
  const made = credentialsOf(parsed.data.credentials, env, dirname(path));
  return Array.isArray(made) ? fail(made) : made;
}
