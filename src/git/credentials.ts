// Credentials for host git (src/git/run.ts): a job's clone (src/job/repo/clone.ts) and a publish
// (src/campaign/publish-git.ts). The userinfo of a `{ git }` URL is a secret: it is taken out of the
// URL git is given (so git records it nowhere: .git/config, reflogs, messages), handed to git by a
// credential helper that reads it from git's environment (argv is readable by every user of the
// host; a process's environment only by its own user), and hidden wherever the URL is shown. Through
// the queue a URL may carry none (it would sit in Redis): a worker takes them from its own
// git-credentials store, PATCHBAY_GIT_CREDENTIALS; a publish takes the forge's token. Pure, but for
// readCredentialStore.
import { count } from "../core/count.js";
import fs from "node:fs/promises";

export type GitCredential = { username: string; password: string };

export interface SplitUrl {
  /** The URL without its secrets: what git is given, and what .git/config keeps. */
  url: string;
  /** scheme, host[:port] exactly as written (git's credential protocol says them so), and the rest. */
  protocol?: string;
  host?: string;
  path?: string;
  /** http(s) userinfo: what the credential helper answers with. */
  credential?: GitCredential;
  /** Every secret value the URL carried (to refuse it through the queue, and to scrub it from text). */
  secrets: string[];
}

const URL_RE = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)(.*)$/is;
// Schemes whose userinfo git sends as HTTP credentials: a user name alone can be a token there
// (`https://<token>@github.com/...`). Elsewhere (ssh://git@host) the user is a login name.
const HTTP_SCHEMES = new Set(["http", "https", "ftp", "ftps"]);

const decode = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

/** A git URL split into the URL git is given and the credentials it carried. */
export function splitUrl(url: string): SplitUrl {
  const m = URL_RE.exec(url);
  if (!m) return { url, secrets: [] }; // a path, or scp-like user@host:path (no secret)
  const [, scheme, authority, rest] = m as unknown as [string, string, string, string];
  const protocol = scheme.toLowerCase();
  // The last "@" ends the userinfo (a raw "@" in a password is still the password's).
  const at = authority.lastIndexOf("@");
  const host = authority.slice(at + 1);
  const base = { protocol, host, path: rest };
  if (at < 0) return { url, ...base, secrets: [] };
  const userinfo = authority.slice(0, at);
  const colon = userinfo.indexOf(":");
  const username = decode(colon < 0 ? userinfo : userinfo.slice(0, colon));
  const password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1));
  if (HTTP_SCHEMES.has(protocol)) {
    // The user name is a secret when it stands alone (a token); beside a password it is a login.
    const secrets = password ? [password] : username ? [username] : [];
    return { url: `${scheme}://${host}${rest}`, ...base, credential: { username, password: password ?? "" }, secrets };
  }
  if (password === undefined) return { url, ...base, secrets: [] };
  // ssh://user:password@host: ssh never uses the password; the login stays.
  return {
    url: `${scheme}://${userinfo.slice(0, colon)}@${host}${rest}`,
    ...base,
    secrets: password ? [password] : [],
  };
}

/** Whether a git URL carries credentials (refused through the queue). */
export function hasCredentials(url: string): boolean {
  const s = splitUrl(url);
  return s.url !== url;
}

/**
 * Hides credentials in URLs anywhere in a text (an error message, git's stderr): `scheme://***@host`.
 * A scheme is at most 32 characters here: unbounded, every word of a long run such as `a.a.a.` was
 * a start the pattern scanned to the run's end (quadratic: 0.9 s for 64 KB of a remote's text).
 */
export const redact = (text: string) =>
  text.replace(/\b([a-z][a-z0-9+.-]{0,31}:\/\/)[^\s/?#@]*(?:@[^\s/?#@]*)*@/gi, "$1***@");

/** Hides credentials in URLs and the given secret values, wherever they occur in the text. */
export function scrub(text: string, secrets: readonly string[] = []): string {
  let out = redact(text);
  for (const s of secrets) if (s) out = out.split(s).join("***");
  return out;
}

export interface StoredCredential {
  protocol: string;
  host: string;
  /** The repo path it is for ("" = every repo on the host). */
  path: string;
  credential: GitCredential;
}

/**
 * A git-credentials store (`git help credential-store`): one `https://user:token@host[:port][/path]`
 * per line, percent-encoded. Blank lines, `#` comments and lines without credentials are skipped.
 */
export function parseCredentialStore(text: string): StoredCredential[] {
  const out: StoredCredential[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const s = splitUrl(line);
    if (!s.credential || !s.protocol || !s.host) continue;
    out.push({
      protocol: s.protocol,
      host: s.host.toLowerCase(),
      path: trimPath(s.path ?? ""),
      credential: s.credential,
    });
  }
  return out;
}

// Only a run's first slash starts the trailing match: every slash of a long run (a client's URL)
// was a start scanned to the run's end otherwise.
const trimPath = (p: string) => p.replace(/[?#].*$/s, "").replace(/^\/+|(?<!\/)\/+$/g, "");

/** The first stored credential for the URL's protocol and host (and path, where the line names one). */
export function matchCredential(store: readonly StoredCredential[], url: string): StoredCredential | undefined {
  const s = splitUrl(url);
  if (!s.protocol || !s.host) return undefined;
  const host = s.host.toLowerCase();
  const repo = trimPath(s.path ?? "");
  const strip = (p: string) => p.replace(/\.git$/, "");
  return store.find(
    (c) =>
      c.protocol === s.protocol &&
      c.host === host &&
      (c.path === "" || strip(repo) === strip(c.path) || repo.startsWith(`${c.path}/`)),
  );
}

/** Bytes read from a store at most: it holds lines of credentials, not data. */
const MAX_STORE_BYTES = 1024 * 1024;

/**
 * The worker's store, read at each clone (a rotated token is taken without a restart). Like ssh
 * with its keys, a store other users can read, or owned by someone else, is refused: the error
 * (a host problem, not the job's) says how to fix it.
 */
export async function readCredentialStore(file: string): Promise<StoredCredential[]> {
  const name = `PATCHBAY_GIT_CREDENTIALS=${file}`;
  let st: import("node:fs").Stats;
  try {
    st = await fs.stat(file);
  } catch (err) {
    throw new Error(
      `${name}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}: the worker's git credentials store cannot be read`,
      { cause: err },
    );
  }
  if (!st.isFile()) throw new Error(`${name}: not a regular file`);
  if (st.mode & 0o077)
    throw new Error(
      `${name}: mode ${(st.mode & 0o777).toString(8).padStart(4, "0")} lets other users read the credentials; chmod 600 ${file}`,
    );
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== 0)
    throw new Error(`${name}: owned by uid ${st.uid}, not by the worker's user (${uid}) or root`);
  if (st.size > MAX_STORE_BYTES) throw new Error(`${name}: larger than ${count(MAX_STORE_BYTES, "byte")}`);
  return parseCredentialStore(await fs.readFile(file, "utf8"));
}

// The helper git runs for credentials: it answers `get` only, only for the clone's own protocol and
// host (a redirect elsewhere gets nothing), from the environment; `store` and `erase` touch no file.
// The operator's own helpers are reset for such a clone: a `store` helper would write the token down.
// printf is a builtin of sh: the secret is in no process's argv on the way to git either.
const HELPER = [
  '!f() { test "$1" = get || exit 0',
  'while IFS= read -r l && test -n "$l"; do case "$l" in protocol=*) p=${l#protocol=};; host=*) h=${l#host=};; esac; done',
  'test "$p" = "$PATCHBAY_GIT_PROTOCOL" && test "$h" = "$PATCHBAY_GIT_HOST" || exit 0',
  'printf \'username=%s\\npassword=%s\\n\' "$PATCHBAY_GIT_USERNAME" "$PATCHBAY_GIT_PASSWORD"; }; f',
].join("; ");

/** What a clone with this credential adds to git's argv (no secret) and environment (the secret). */
export function credentialHelper(
  protocol: string,
  host: string,
  c: GitCredential,
): { args: string[]; env: Record<string, string> } {
  // git's credential protocol is line-based: a newline or NUL in a value could forge another key.
  if (/[\r\n\0]/.test(c.username + c.password)) throw new Error("a git credential contains a newline or NUL");
  return {
    args: ["-c", "credential.helper=", "-c", `credential.helper=${HELPER}`],
    env: {
      PATCHBAY_GIT_PROTOCOL: protocol,
      PATCHBAY_GIT_HOST: host,
      PATCHBAY_GIT_USERNAME: c.username,
      PATCHBAY_GIT_PASSWORD: c.password,
    },
  };
}
