// Which request and response headers the egress proxy passes on: hop-by-hop headers end at the
// proxy, and a request loses the headers some servers and CDNs read as the host in place of Host.
// Pure.
import type http from "node:http";

/** Headers of one connection (RFC 9110 §7.6.1), never forwarded. */
export const HOP_BY_HOP = new Set([
  "connection",
  "proxy-connection",
  "keep-alive",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);
// Request headers that some servers and CDNs read as the host in place of Host: a request must
// reach the URL's host and no other, so they are not sent.
export const HOST_OVERRIDES = new Set([
  "forwarded",
  "x-forwarded-host",
  "x-forwarded-server",
  "x-host",
  "x-original-host",
  "x-original-url",
  "x-rewrite-url",
  "x-http-host-override",
]);
/** The headers without hop-by-hop ones and without those in `drop` (lower-case names). */
export function endToEnd(
  headers: http.IncomingHttpHeaders | http.OutgoingHttpHeaders,
  drop?: Set<string>,
): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) {
    const name = k.toLowerCase();
    if (v !== undefined && !HOP_BY_HOP.has(name) && !drop?.has(name)) out[k] = v;
  }
  return out;
}
