// GitLab's answers read with a bound: patchbay's own request handler for gitbeaker, in place of the
// one @gitbeaker/rest presets, which calls the global fetch and reads each answer whole. It does
// what that one does (the URL from the API's prefix, the endpoint and the query; the resource's
// rate limiter; a 429 or 502 asked again, ten tries at most, after a pause that doubles from a
// quarter of a millisecond, as gitbeaker's; a failed status raised as gitbeaker's
// GitbeakerRequestError with the request and the answer as its cause), with two differences:
// - every answer comes through boundedFetch (fetch.ts), so one over the bound, a failed or
//   a retried one too, fails the call with AnswerTooLargeError, not asked again;
// - an answer's `link` header is not handed on, so gitbeaker follows no next page: one call reads
//   one answer (bar retries), where a forge naming page after page (of a list, or of what should
//   have been one object) would have had each held at once, each up to the bound.
import { count } from "../../core/count.js";
import {
  createRequesterFn,
  type FormattedResponse,
  GitbeakerRequestError,
  GitbeakerRetryError,
  GitbeakerTimeoutError,
  getMatchingRateLimiter,
  type RateLimiters,
  type RequesterType,
  type RequestOptions,
  type ResourceOptions,
} from "@gitbeaker/requester-utils";
import { AnswerTooLargeError, boundedFetch } from "./fetch.js";

/** Statuses gitbeaker asks again on, and how many tries it makes in all. */
const RETRIED = new Set([429, 502]);
const TRIES = 10;

/** A gitbeaker `requesterFn` whose every answer is read up to `max` bytes (default FORGE_ANSWER_MAX_BYTES). */
export function boundedRequester(max?: number): (options: ResourceOptions) => RequesterType {
  const fetchBounded = boundedFetch(max);
  return createRequesterFn(
    (_resource, options) => Promise.resolve(options),
    (endpoint, options) => send(fetchBounded, endpoint, options ?? {}),
  );
}

type Options = Omit<RequestOptions, "rateLimiters"> & { rateLimiters?: RateLimiters };

async function send(fetchBounded: typeof fetch, endpoint: string, options: Options): Promise<FormattedResponse> {
  const { rateLimiters, prefixUrl, searchParams, method = "GET", asStream, headers, body, signal } = options;
  const url = new URL(endpoint, prefixUrl && !prefixUrl.endsWith("/") ? `${prefixUrl}/` : prefixUrl);
  url.search = searchParams ?? "";
  const rateLimit = getMatchingRateLimiter(endpoint, rateLimiters, method);
  let last = 0;
  for (let i = 0; i < TRIES; i++) {
    const request = new Request(url, { method, headers, body, signal });
    await rateLimit();
    const res = await fetchBounded(request).catch((e: unknown) => {
      throw timedOut(e);
    });
    if (res.ok) {
      const answer = res.status === 204 ? null : asStream ? res.body : await bodyOf(res);
      const { link: _link, ...rest } = Object.fromEntries(res.headers);
      return { body: answer as FormattedResponse["body"], headers: rest, status: res.status };
    }
    if (!RETRIED.has(res.status)) throw await refused(request, res);
    last = res.status;
    await new Promise((r) => setTimeout(r, 2 ** i * 0.25));
  }
  throw new GitbeakerRetryError(
    `Could not successfully complete this request after ${count(TRIES, "retry", "retries")}, last status code: ${last}. ${last === 429 ? "Check the applicable rate limits for this endpoint" : "Verify the status of the endpoint"}.`,
  );
}

/** A timeout (the resource's queryTimeout) or an abort as gitbeaker says it; the bound's error as it is. */
function timedOut(e: unknown): unknown {
  if (e instanceof AnswerTooLargeError) return e;
  const name = (e as { name?: unknown } | null)?.name;
  return name === "TimeoutError" || name === "AbortError" ? new GitbeakerTimeoutError("Query timeout was reached") : e;
}

/** The answer's body as gitbeaker reads it: JSON (an empty one as {}), text, or else a Blob. */
async function bodyOf(res: Response): Promise<unknown> {
  const type = (res.headers.get("content-type") ?? "").split(";")[0]!.trim();
  if (type === "application/json") return ((await res.json()) as unknown) || {};
  if (type.startsWith("text/")) return res.text();
  return res.blob();
}

/** A failed status as gitbeaker raises it: GitLab's `error` or `message` (JSON when not a string) as the description. */
async function refused(request: Request, response: Response): Promise<GitbeakerRequestError> {
  const content = await response.text();
  let description = content;
  if (response.headers.get("content-type")?.includes("application/json")) {
    try {
      const said = (JSON.parse(content) as { error?: unknown; message?: unknown } | null) ?? {};
      const it = said.error || said.message || "";
      description = typeof it === "string" ? it : JSON.stringify(it);
    } catch {
      // Not JSON after all: the text as it came (gitbeaker would throw the SyntaxError instead).
    }
  }
  return new GitbeakerRequestError(description, { cause: { description, request, response } });
}
