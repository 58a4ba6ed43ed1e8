// A forge's answers read with a bound: a hostile or broken API (or whatever a proxy or a redirect put
// in its place) cannot make the publishing host hold gigabytes of one answer. `fetch` as a forge's
// client calls it, each answer's body counted as it arrives and failed past the bound with an error
// that says so (an answer that declares more is failed before its first byte is read).

import { plural } from "../../core/count.js";
import { kinded } from "../../core/errors.js";

/** Bytes of one forge answer read at most: a page of 100 pull requests with bodies of GitHub's 65,536 characters fits. */
export const FORGE_ANSWER_MAX_BYTES = 16 * 1024 * 1024;

/** An answer over the bound; the forge's error names the call it was (forge-error.ts's badAnswer). */
export class AnswerTooLargeError extends kinded("infra") {
  constructor(readonly max: number) {
    super(
      `the answer is over ${max.toLocaleString("en-US")} ${plural(max, "byte")}, the most patchbay reads of one forge answer`,
    );
    // The read was aborted, and named so: a client passes an AbortError through as it is (Octokit
    // neither wraps it nor retries the call, which would only read as much again).
    this.name = "AbortError";
  }
}

/**
 * `base` (the global fetch) whose answers are read whole here, at most `max` bytes, before the client
 * sees them: past it (or declaring more) the call fails with AnswerTooLargeError, the rest unread.
 * (Read here, not as the client reads: a client may swallow an error of its body's reading.)
 */
export function boundedFetch(max = FORGE_ANSWER_MAX_BYTES, base: typeof fetch = globalThis.fetch): typeof fetch {
  return async (input, init) => {
    const res = await base(input, init);
    if (!res.body) return res;
    if (Number(res.headers.get("content-length")) > max) {
      await res.body.cancel().catch(() => {});
      throw new AnswerTooLargeError(max);
    }
    const chunks: Uint8Array[] = [];
    let seen = 0;
    const reader = res.body.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      seen += r.value.byteLength;
      if (seen > max) {
        await reader.cancel().catch(() => {});
        throw new AnswerTooLargeError(max);
      }
      chunks.push(r.value);
    }
    const out = new Response(Buffer.concat(chunks), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
    Object.defineProperty(out, "url", { value: res.url });
    return out;
  };
}
