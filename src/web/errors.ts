// The dashboard server's error answers, every one application/problem+json (RFC 9457, the API's
// helper: src/web/api/problem.ts) with a detail that names the fix: a path no route has (404, and
// the pages and documents there are), a path that another method takes (405 with Allow), a body of a
// type the route does not take (415 naming the types it does), NDJSON sent as JSON to a route that
// takes lines, a body over the limit, and anything a route throws. The guard's refusals (auth.ts) use
// the same helper. server.ts sets these on the root; the HTTP API (api/index.ts) uses the same words.
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import { problem, problemOf, sendProblem, type Problem } from "./api/problem.js";

/** The content types a route takes when it declares none (fastify's own parsers). */
export const DEFAULT_ACCEPTS = ["application/json"];

/** The routes' paths as patterns, by method, for telling a 405 from a 404. */
export class RouteIndex {
  private readonly routes: { methods: string[]; pattern: RegExp }[] = [];

  /** Adds a route (fastify's onRoute hook calls this for every route registered after it). */
  add(route: Pick<RouteOptions, "method" | "url">): void {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((m) => m.toUpperCase());
    const pattern = new RegExp(
      `^${route.url
        .split("/")
        .map((seg) => (seg.startsWith(":") ? "[^/]+" : seg === "*" ? ".*" : seg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/")}/?$`,
    );
    this.routes.push({ methods, pattern });
  }

  /** The methods some route takes at this path (sorted; empty: no route has it). */
  methodsAt(path: string): string[] {
    const set = new Set<string>();
    for (const r of this.routes) if (r.pattern.test(path)) r.methods.forEach((m) => set.add(m));
    return [...set].sort();
  }
}

const WHERE = "the dashboard is at /, the HTTP API's routes are in /api/openapi.json";

/** A 404 or a 405 for a request no route took (fastify's not-found handler). */
export function noRoute(index: RouteIndex, req: FastifyRequest): { p: Problem; allow?: string } {
  const path = req.url.split("?")[0]!;
  const shown = path.slice(0, 200);
  const allowed = index.methodsAt(path).filter((m) => m !== req.method);
  if (allowed.length)
    return {
      p: problem(405, `${shown} does not take ${req.method.slice(0, 16)}: send ${allowed.join(" or ")}`, {
        kind: "usage",
      }),
      allow: allowed.join(", "),
    };
  return { p: problem(404, `no route ${req.method.slice(0, 16)} ${shown}: ${WHERE}`, { kind: "not-found" }) };
}

/** What the error handler knows of the route and the request, for the words of a 415 or a bad body. */
export interface RequestContext {
  bodyLimit?: number;
  /** The content types the route takes (its schema's `consumes`, else DEFAULT_ACCEPTS). */
  accepts: string[];
  /** The request's Content-Type, as sent. */
  contentType?: string;
}

/** The route's and the request's part in a problem's words (the request's Content-Type cut to 100 characters). */
export function requestContext(req: FastifyRequest): RequestContext {
  const consumes = (req.routeOptions.schema as { consumes?: string[] } | undefined)?.consumes;
  const ct = req.headers["content-type"];
  return {
    bodyLimit: req.routeOptions.bodyLimit,
    accepts: consumes?.length ? consumes : DEFAULT_ACCEPTS,
    ...(typeof ct === "string" ? { contentType: ct.slice(0, 100) } : {}),
  };
}

const mediaType = (ct: string | undefined) => (ct ?? "").split(";")[0]!.trim().toLowerCase();

/**
 * A thrown error as a problem that names the fix: problemOf's words, with the accepted types on a
 * 415 and the right type on a JSON body sent to a route that takes lines of JSON (NDJSON).
 */
export function problemFor(err: unknown, ctx: RequestContext): Problem {
  const p = problemOf(err, ctx.bodyLimit);
  const code = (err as { code?: unknown }).code;
  const sent = mediaType(ctx.contentType);
  const takes = `this route takes Content-Type ${ctx.accepts.join(", ")}`;
  if (p.status === 415)
    return problem(
      415,
      `${sent ? `Content-Type ${sent} is not taken here` : "the body has no Content-Type"}: ${takes}`,
      {
        kind: "usage",
      },
    );
  const linesRoute = ctx.accepts.includes("application/x-ndjson") && !ctx.accepts.includes("application/json");
  if (linesRoute && sent === "application/json" && code === "FST_ERR_CTP_INVALID_JSON_BODY")
    return problem(
      400,
      "the body is not one JSON document: it looks like NDJSON (one JobSpec per line) sent as application/json; send it with Content-Type: application/x-ndjson",
      { kind: "usage" },
    );
  return p;
}

/** Sets the root's not-found and error handlers, and the route index they read (before any route). */
export function problemHandlers(app: FastifyInstance): void {
  const index = new RouteIndex();
  app.addHook("onRoute", (r) => index.add(r));
  app.setNotFoundHandler((req: FastifyRequest, reply: FastifyReply) => {
    const { p, allow } = noRoute(index, req);
    return sendProblem(reply, p, allow ? { Allow: allow } : {});
  });
  app.setErrorHandler((err, req, reply) => sendProblem(reply, problemFor(err, requestContext(req))));
}
