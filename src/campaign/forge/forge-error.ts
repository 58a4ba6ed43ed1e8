// What a forge call that failed tells the user: which forge and repository, what failed, and what
// to do. The forge's own words are hostile input (bounded, control characters dropped) and the
// token is cut out of them; the library's error is not kept as the cause, since some carry the
// request's headers, token and all.
import { plural } from "../../core/count.js";
import type { z } from "zod";
import { tokenVariable } from "../../core/config/forges.js";
import { kinded } from "../../core/errors.js";
import { CHANGE_NOUNS } from "../changeset.js";
import type { ForgeKind } from "./forge.js";

/** A forge's API refused or failed a call. `status`: the HTTP status, when there was an answer. */
export class ForgeError extends kinded("infra") {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface ForgeCall {
  kind: ForgeKind;
  /** The host as in git URLs, e.g. github.com. */
  host: string;
  /** owner/name (GitLab: group/sub/name). */
  repo: string;
  /** What was being done, e.g. "creating a pull request". */
  what: string;
  write: boolean;
}

const FORGE_NAME: Record<ForgeKind, string> = { github: "GitHub", gitlab: "GitLab" };

/** A forge's text made safe to show: the token (if any) cut out, control characters dropped, at most `max` characters. */
export function scrub(text: string, token: string | undefined, max = 300): string {
  let s = token && token.length >= 4 ? text.split(token).join("[token]") : text;
  s = s.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]+/g, " ").trim();
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

function advice(call: ForgeCall, status: number | undefined, hasToken: boolean, detail: string): string {
  const { host, repo } = call;
  const where = `set a valid one in ${tokenVariable(host)}${host === "github.com" ? " (or GITHUB_TOKEN)" : host === "gitlab.com" ? " (or GITLAB_TOKEN)" : ""}`;
  const needs =
    call.kind === "github"
      ? `it needs "Pull requests: read and write" (a fine-grained token) or the "repo" scope (a classic token) on ${repo}`
      : `it needs the "api" scope and at least the Developer role on ${repo}`;
  const [one, many] = CHANGE_NOUNS[call.kind];
  if (status === undefined)
    return `${host} did not answer (${detail}); check the API URL for ${host} (PATCHBAY_FORGES) and the network`;
  if (status === 401)
    return hasToken
      ? `the token for ${host} is invalid or expired (401); ${where}`
      : `no token was given for ${host} (401); set one in ${tokenVariable(host)}`;
  if (status === 429 || (status === 403 && /rate limit/i.test(detail)))
    return `${host} rate limits this token (${status}) and the retries are spent; try again later`;
  if ((status === 403 || status === 404) && call.write)
    return `the token for ${host} cannot write ${many} to ${repo} (${status}): ${needs}`;
  if (status === 403) return `the token for ${host} cannot read ${repo} (403): ${needs}`;
  if (status === 404) return `${repo} or the ${one} is not on ${host}, or the token for ${host} cannot see it (404)`;
  if (status === 409 || status === 422) return `${host} refused it (${status}): ${detail}`;
  return `${host} answered ${status}: ${detail || "no message"}${status >= 500 ? "; try again later" : ""}`;
}

/** The error for a failed call, in words that name the forge, the repository, what failed and what to do; never the token. */
export function forgeError(
  call: ForgeCall,
  status: number | undefined,
  detail: string,
  token: string | undefined,
): ForgeError {
  const said = scrub(detail, token);
  return new ForgeError(
    `${FORGE_NAME[call.kind]} ${call.host}: ${call.what} in ${call.repo} failed: ${advice(call, status, !!token, said)}`,
    status,
  );
}

/** An answer that is not what the API documents: said as such, with the first problem. */
export function badAnswer(call: ForgeCall, problem: string, token: string | undefined): ForgeError {
  return new ForgeError(
    `${FORGE_NAME[call.kind]} ${call.host}: ${call.what} in ${call.repo} failed: the answer is not what the API documents (${scrub(problem, token, 200)})`,
  );
}

/**
 * A forge's answer read through the schema the API documents for it; anything else is a
 * `badAnswer` naming the first three problems. Both hosts' forges read every answer this way.
 */
export function parseAnswer<S extends z.ZodType>(
  call: ForgeCall,
  schema: S,
  data: unknown,
  token: string | undefined,
): z.infer<S> {
  const r = schema.safeParse(data);
  if (!r.success)
    throw badAnswer(
      call,
      r.error.issues
        .map((i) => `${i.path.join(".")}: ${i.message}`)
        .slice(0, 3)
        .join("; "),
      token,
    );
  return r.data;
}

/** `text` cut to at most `max` UTF-16 units with a note saying so (never between a surrogate pair). */
export function cutWithNote(text: string, max: number, what: string): string {
  if (text.length <= max) return text;
  const note = `\n\n… (cut by patchbay: the ${what} was ${text.length.toLocaleString("en-US")} ${plural(text.length, "character")}; the forge takes ${max.toLocaleString("en-US")})`;
  let end = max - note.length;
  if (end > 0 && /[\ud800-\udbff]/.test(text[end - 1]!)) end--;
  return text.slice(0, Math.max(0, end)) + note;
}

/** A one-line title of at most `max` characters. */
export function boundTitle(title: string, max: number): string {
  const line = title.replace(/[\r\n]+/g, " ");
  if (line.length <= max) return line;
  let end = max - 1;
  if (/[\ud800-\udbff]/.test(line[end - 1]!)) end--;
  return `${line.slice(0, end)}…`;
}
