// The dashboard's guard, as a fastify plugin. Every request needs the token, reads (GET, HEAD)
// included, loopback bind or not: a reverse proxy on the same host (nginx without any
// proxy_set_header sends no header saying so) makes every remote client a loopback peer, so being
// reached over loopback proves nothing about who asks. Tokenless reads are opt-in (`openReads`:
// `patchbay dashboard --loopback-reads`, a loopback bind only), and even then a request carrying a
// proxy's header (Forwarded, X-Forwarded-*, X-Real-IP, Via) needs the token. The token is given
// once as ?token=…, which sets an HttpOnly SameSite=Strict cookie (Secure when the request came
// over TLS) and redirects to the same path without it, or on each request as
// `Authorization: Bearer …` (scrapers, scripts). On loopback the Host header must name loopback (no
// DNS rebinding), and a mutation's Origin, when sent, must be this origin. The HTTP API's paths
// (/api/v1, /api/openapi.json: docs/api.md) keep the Host check and add scopes: apiGuard below.
//
// The plugin is not encapsulated (fastify's documented `skip-override`, what fastify-plugin sets):
// its onRequest hook lands on the root context, so it guards every route registered after it,
// bull-board's and the 404 included.
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { createHash, timingSafeEqual } from "node:crypto";
import type { TLSSocket } from "node:tls";
import type { ApiToken } from "../core/config/config.js";
import { problem, sendProblem } from "./api/problem.js";

export interface AuthOptions {
  /** The secret (at least 16 characters; checked by src/web/settings.ts). */
  token: string;
  /** Whether the dashboard binds a loopback address. */
  loopback: boolean;
  /** Reads without a token from a loopback peer that no proxy header marks as proxied (opt-in; a loopback bind only). */
  openReads?: boolean;
  /** The HTTP API's tokens (PATCHBAY_API_TOKENS) and the origins allowed to call it (PATCHBAY_API_CORS_ORIGINS). */
  api?: { tokens: readonly ApiToken[]; corsOrigins: readonly string[] };
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);
export const isLoopback = (host: string) => LOOPBACK.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
const COOKIE = "patchbay_dashboard";
const SAFE_METHODS = new Set(["GET", "HEAD"]);

/** Whether a request needs the token: every request, but a read when tokenless reads are open (see openReadsFor). */
export const needsToken = (method: string, openReads: boolean) => !openReads || !SAFE_METHODS.has(method.toUpperCase());

/**
 * The headers a proxy adds on the way (RFC 7239's Forwarded, the de-facto X-Forwarded-* family,
 * nginx's X-Real-IP, HTTP's Via). Their presence is only ever used to take tokenless reads away,
 * never to grant anything, so a client that forges one only makes itself show its token. Their
 * absence proves nothing (a proxy may send none): that is why tokenless reads are opt-in.
 */
const PROXY_HEADERS = [
  "forwarded",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "x-forwarded-port",
  "x-real-ip",
  "via",
];
const proxied = (headers: Record<string, string | string[] | undefined>) =>
  PROXY_HEADERS.some((h) => headers[h] !== undefined);

/** Whether this request may read without a token: opened by the operator on a loopback bind, and no proxy's header on it. */
const openReadsFor = (req: FastifyRequest, { loopback, openReads }: AuthOptions) =>
  loopback && openReads === true && !proxied(req.headers);

const digest = (s: string) => createHash("sha256").update(s).digest();
/** Constant time whatever the lengths: both sides hashed first. */
const sameSecret = (a: string, b: string) => timingSafeEqual(digest(a), digest(b));

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i).trim() === name) {
      try {
        return decodeURIComponent(part.slice(i + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * Whether a request reached us over TLS: our own HTTPS, or a proxy in front that says so. The header
 * is trusted for one thing only, adding `Secure` to the cookie: a client that forges it only keeps
 * its own cookie off plain HTTP.
 */
function overTls(encrypted: boolean, headers: Record<string, string | string[] | undefined>): boolean {
  if (encrypted) return true;
  const first = (v: string | string[] | undefined) =>
    (Array.isArray(v) ? v[0] : v)?.split(",")[0]?.trim().toLowerCase();
  if (first(headers["x-forwarded-proto"]) === "https") return true;
  return /(^|;)\s*proto="?https"?\s*(;|$)/i.test(first(headers.forwarded) ?? "");
}

/** The cookie the token sets: Secure over TLS (see overTls). */
const tokenCookie = (token: string, secure: boolean) =>
  `${COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/${secure ? "; Secure" : ""}`;

/** The token as a Bearer header or the cookie ?token= set. */
function authorized(req: FastifyRequest, token: string): boolean {
  const h = req.headers.authorization;
  if (typeof h === "string" && h.startsWith("Bearer ") && sameSecret(h.slice(7).trim(), token)) return true;
  const c = cookieValue(req.headers.cookie, COOKIE);
  return c !== undefined && sameSecret(c, token);
}

/** DNS rebinding: a page of another site resolving its name to 127.0.0.1 sends its own Host. */
function loopbackHost(hostHeader: string): boolean {
  return isLoopback(hostHeader.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1"));
}

/** ?token=… on a GET or HEAD: the cookie, and a redirect to the same path without the token. */
function exchangeToken(req: FastifyRequest, reply: FastifyReply, url: URL, given: string, token: string) {
  if (!sameSecret(given, token))
    return sendProblem(reply, problem(401, `wrong token in ?token=: ${DASHBOARD_TOKEN_FIX}`, { kind: "usage" }), {
      "WWW-Authenticate": "Bearer",
    });
  url.searchParams.delete("token");
  reply.header(
    "Set-Cookie",
    tokenCookie(token, overTls((req.raw.socket as TLSSocket).encrypted === true, req.headers)),
  );
  return reply.redirect(`${url.pathname.replace(/^[/\\]+/, "/")}${url.search}`, 303); // always this origin
}

/** A mutation whose Origin (when sent) is not this origin. */
function crossOrigin(req: FastifyRequest): boolean {
  const origin = req.headers.origin;
  const host = req.headers.host ?? "";
  return origin !== undefined && origin !== `http://${host}` && origin !== `https://${host}`;
}

/** The HTTP API's paths (src/web/api/): their own rules, below. */
export const isApiPath = (path: string) =>
  path === "/api/openapi.json" || path === "/api/v1" || path.startsWith("/api/v1/");

/** Who a request is to the API: a scope and how it said so; "bad" for a Bearer token that is no one's. */
function apiPrincipal(
  req: FastifyRequest,
  token: string,
  tokens: readonly ApiToken[],
): { scope: "read" | "write"; name: string; bearer: boolean } | "bad" | undefined {
  const h = req.headers.authorization;
  if (typeof h === "string") {
    const given = h.startsWith("Bearer ") ? h.slice(7).trim() : "";
    if (given && sameSecret(given, token)) return { scope: "write", name: "the dashboard's token", bearer: true };
    const t = given ? tokens.find((x) => sameSecret(given, x.token)) : undefined;
    return t ? { scope: t.scope, name: `API token "${t.name}"`, bearer: true } : "bad";
  }
  const c = cookieValue(req.headers.cookie, COOKIE);
  return c !== undefined && sameSecret(c, token)
    ? { scope: "write", name: "the dashboard's cookie", bearer: false }
    : undefined;
}

const DASHBOARD_TOKEN_FIX =
  "open the page once as ?token=<PATCHBAY_DASHBOARD_TOKEN, or the one `patchbay dashboard` printed>, or send Authorization: Bearer <it>";
const CROSS_ORIGIN =
  "cross-origin request refused: send it from this dashboard's own pages, or from an origin in PATCHBAY_API_CORS_ORIGINS with an API token as Bearer";

/**
 * A Host that does not name loopback on a loopback bind (what DNS rebinding sends). The header is
 * the client's: bounded, and only ever in the JSON body.
 */
function foreignHost(host: string | undefined) {
  const shown = JSON.stringify((host ?? "").slice(0, 100));
  return problem(
    403,
    `forbidden Host ${shown}: this dashboard binds loopback, open it as http://127.0.0.1:<port>/ or http://localhost:<port>/ (a proxy in front must send a Host naming loopback, e.g. nginx's $proxy_host); to serve another name, start it with --host and that address`,
    { kind: "usage" },
  );
}

const NEEDS_TOKEN =
  "this needs a token: send Authorization: Bearer <the dashboard's token (PATCHBAY_DASHBOARD_TOKEN) or an API token (PATCHBAY_API_TOKENS)>";

/**
 * The API's guard (after the Host check): reads need a token of any scope (none only where
 * openReadsFor says so), writes a token of scope write, loopback or not. A wrong Bearer token is
 * refused even where none is needed. CORS only for the configured origins; a cross-origin write
 * only with a Bearer token from one of them (the cookie is the dashboard's, never a cross-site
 * credential).
 */
function apiGuard(req: FastifyRequest, reply: FastifyReply, opts: AuthOptions) {
  const { token, api } = opts;
  const origin = req.headers.origin;
  const corsOk = origin !== undefined && (api?.corsOrigins ?? []).includes(origin);
  if (corsOk && origin)
    reply
      .header("Access-Control-Allow-Origin", origin)
      .header("Vary", "Origin")
      .header("Access-Control-Expose-Headers", "Location");
  if (req.method === "OPTIONS") {
    if (!corsOk)
      return sendProblem(
        reply,
        problem(403, "cross-origin request refused: its Origin is not in PATCHBAY_API_CORS_ORIGINS"),
      );
    return reply
      .code(204)
      .headers({
        "Access-Control-Allow-Methods": "GET, POST",
        "Access-Control-Allow-Headers": "Authorization, Content-Type, Last-Event-ID",
        "Access-Control-Max-Age": "600",
      })
      .send();
  }
  const who = apiPrincipal(req, token, api?.tokens ?? []);
  const write = !SAFE_METHODS.has(req.method);
  if (who === "bad")
    return sendProblem(reply, problem(401, `wrong token; ${NEEDS_TOKEN}`), {
      "WWW-Authenticate": 'Bearer error="invalid_token"',
    });
  if (!who)
    return write || !openReadsFor(req, opts)
      ? sendProblem(reply, problem(401, NEEDS_TOKEN), { "WWW-Authenticate": "Bearer" })
      : undefined;
  if (write && who.scope !== "write")
    return sendProblem(reply, problem(403, `${who.name} has scope read: this needs a token of scope write`), {
      "WWW-Authenticate": 'Bearer error="insufficient_scope", scope="write"',
    });
  if (write && crossOrigin(req) && !(corsOk && who.bearer)) return sendProblem(reply, problem(403, CROSS_ORIGIN));
  return undefined;
}

declare module "fastify" {
  interface FastifyRequest {
    /** Whether this request carries the dashboard's token (cookie or Bearer): its pages' writes (Cancel, Retry) would pass. */
    canWrite: boolean;
  }
}

const auth: FastifyPluginAsync<AuthOptions> = async (app, opts) => {
  const { token, loopback } = opts;
  app.decorateRequest("canWrite", false);
  app.addHook("onRequest", async (req, reply) => {
    reply.header("X-Content-Type-Options", "nosniff");
    reply.header("Referrer-Policy", "no-referrer");
    reply.header("X-Frame-Options", "DENY");
    if (loopback && !loopbackHost(req.headers.host ?? "")) return sendProblem(reply, foreignHost(req.headers.host));
    if (isApiPath(req.url.split("?")[0]!)) return apiGuard(req, reply, opts);
    const url = new URL(req.url, "http://x");
    const given = url.searchParams.get("token");
    if (given !== null && SAFE_METHODS.has(req.method)) return exchangeToken(req, reply, url, given, token);
    req.canWrite = authorized(req, token);
    if (needsToken(req.method, openReadsFor(req, opts)) && !req.canWrite) {
      return sendProblem(reply, problem(401, `this needs the dashboard token: ${DASHBOARD_TOKEN_FIX}`), {
        "WWW-Authenticate": "Bearer",
      });
    }
    if (!SAFE_METHODS.has(req.method) && crossOrigin(req)) return sendProblem(reply, problem(403, CROSS_ORIGIN));
  });
};

/** Register before the routes it guards: `await app.register(authPlugin, { token, loopback, openReads })`. */
export const authPlugin: FastifyPluginAsync<AuthOptions> = Object.assign(auth, { [Symbol.for("skip-override")]: true });

/**
 * fastify's own refusals of a URL, made before any hook or route (Fastify's `frameworkErrors`): a
 * path parameter over maxParamLength, a bad %-escape. Its default echoes the whole URL; here the
 * words are fixed, with the guard's nosniff, as problem+json like every error of the server.
 */
export function frameworkError(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const [status, detail] =
    err.code === "FST_ERR_MAX_PARAM_LENGTH"
      ? [414, "a path parameter is too long: a job id is at most 128 characters, check the URL"]
      : err.code === "FST_ERR_BAD_URL"
        ? [400, "the URL is malformed (a bad %-escape): percent-encode each path segment (encodeURIComponent)"]
        : [500, "internal error"];
  reply.header("X-Content-Type-Options", "nosniff");
  // Fastify takes this handler's reply as sent; it awaits nothing from it (its type returns void).
  sendProblem(reply, problem(status, detail, { kind: status === 500 ? "internal" : "usage" }));
}
