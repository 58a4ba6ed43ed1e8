// The dashboard's guard, as a fastify plugin. Every action (cancel, retry, bull-board's mutations:
// any method but GET/HEAD) needs the token; on a bind that is not loopback every request does. The
// token is given once as ?token=…, which sets an HttpOnly SameSite=Strict cookie (Secure when the
// request came over TLS) and redirects to the same path without it, or on each request as
// `Authorization: Bearer …` (scrapers, scripts). On loopback the Host header must name loopback (no
// DNS rebinding), and a mutation's Origin, when sent, must be this origin.
//
// The plugin is not encapsulated (fastify's documented `skip-override`, what fastify-plugin sets):
// its onRequest hook lands on the root context, so it guards every route registered after it,
// bull-board's and the 404 included.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { createHash, timingSafeEqual } from "node:crypto";
import type { TLSSocket } from "node:tls";

export interface AuthOptions {
  /** The secret (at least 16 characters; checked by src/web/settings.ts). */
  token: string;
  /** Whether the dashboard binds a loopback address. */
  loopback: boolean;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);
export const isLoopback = (host: string) => LOOPBACK.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
const COOKIE = "patchbay_dashboard";
const SAFE_METHODS = new Set(["GET", "HEAD"]);

/** Whether a request needs the token: every mutation, and on a bind that is not loopback every request. */
export const needsToken = (method: string, loopbackBind: boolean) => !loopbackBind || !SAFE_METHODS.has(method.toUpperCase());

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
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v)?.split(",")[0]?.trim().toLowerCase();
  if (first(headers["x-forwarded-proto"]) === "https") return true;
  return /(^|;)\s*proto="?https"?\s*(;|$)/i.test(first(headers.forwarded) ?? "");
}

/** The cookie the token sets: Secure over TLS (see overTls). */
const tokenCookie = (token: string, secure: boolean) => `${COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/${secure ? "; Secure" : ""}`;

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
  if (!sameSecret(given, token)) return reply.code(401).type("text/plain").send("wrong token\n");
  url.searchParams.delete("token");
  reply.header("Set-Cookie", tokenCookie(token, overTls((req.raw.socket as TLSSocket).encrypted === true, req.headers)));
  return reply.redirect(`${url.pathname.replace(/^[/\\]+/, "/")}${url.search}`, 303); // always this origin
}

/** A mutation whose Origin (when sent) is not this origin. */
function crossOrigin(req: FastifyRequest): boolean {
  const origin = req.headers.origin;
  const host = req.headers.host ?? "";
  return origin !== undefined && origin !== `http://${host}` && origin !== `https://${host}`;
}

const auth: FastifyPluginAsync<AuthOptions> = async (app, { token, loopback }) => {
  app.addHook("onRequest", async (req, reply) => {
    reply.header("X-Content-Type-Options", "nosniff");
    reply.header("Referrer-Policy", "no-referrer");
    reply.header("X-Frame-Options", "DENY");
    if (loopback && !loopbackHost(req.headers.host ?? "")) return reply.code(403).type("text/plain").send("forbidden host\n");
    const url = new URL(req.url, "http://x");
    const given = url.searchParams.get("token");
    if (given !== null && SAFE_METHODS.has(req.method)) return exchangeToken(req, reply, url, given, token);
    if (needsToken(req.method, loopback) && !authorized(req, token)) {
      return reply.code(401).type("application/json").send({ error: "this needs the dashboard token (PATCHBAY_DASHBOARD_TOKEN): open the page once with ?token=…, or send Authorization: Bearer …" });
    }
    if (!SAFE_METHODS.has(req.method) && crossOrigin(req)) return reply.code(403).type("application/json").send({ error: "cross-origin request refused" });
  });
};

/** Register before the routes it guards: `await app.register(authPlugin, { token, loopback })`. */
export const authPlugin: FastifyPluginAsync<AuthOptions> = Object.assign(auth, { [Symbol.for("skip-override")]: true });
