// The HTTP API's errors: application/problem+json (RFC 9457) with type, title, status and detail,
// and `errors` (one line per problem) for a bad JobSpec or batch. The detail is the message the CLI
// prints for the same failure: the errors are the same classes (src/core/errors.ts), mapped here by kind.
import { count } from "../../core/count.js";
import type { FastifyError, FastifyReply } from "fastify";
import { STATUS_CODES } from "node:http";
import { z } from "zod";
import { kinded, kindOf, PatchbayError, type ErrorKind } from "../../core/errors.js";
import { apiRegistry } from "./registry.js";

/** A request the API cannot take as it is (a bad query parameter, body or format): 400. */
export class BadRequest extends kinded("usage") {}

export const PROBLEM_TYPE = "application/problem+json";

export const Problem = z.object({
  type: z.string().register(apiRegistry, {
    description: "urn:patchbay:problem:<kind>, the error's kind (docs/architecture.md#errors), or about:blank",
  }),
  title: z.string(),
  status: z.int(),
  detail: z.string(),
  errors: z.array(z.string()).optional().register(apiRegistry, {
    description: "a bad JobSpec or batch: one line per problem, each naming its field (or line)",
  }),
});
export type Problem = z.infer<typeof Problem>;

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  410: "Gone",
  414: "URI Too Long",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  500: "Internal Server Error",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/** HTTP status by the error's kind; kinds not listed are 500. */
const STATUS_OF: Partial<Record<ErrorKind, number>> = {
  spec: 400,
  usage: 400,
  "not-found": 404,
  conflict: 409,
  failed: 409,
  timeout: 504,
  infra: 503,
  config: 500,
};

export function problem(status: number, detail: string, opts: { kind?: ErrorKind; errors?: string[] } = {}): Problem {
  return {
    type: opts.kind ? `urn:patchbay:problem:${opts.kind}` : "about:blank",
    title: TITLES[status] ?? STATUS_CODES[status] ?? "Error",
    status,
    detail,
    ...(opts.errors ? { errors: opts.errors } : {}),
  };
}

export const sendProblem = (reply: FastifyReply, p: Problem, headers: Record<string, string> = {}) =>
  reply
    .code(p.status)
    .headers({ ...headers, "Cache-Control": "no-store" })
    .type(PROBLEM_TYPE)
    .send(p);

/**
 * "invalid JobSpec: repo: required; budget.usd: must be …" as lines. parseJobSpec joins one line
 * per field with "; ", each starting with its path; a "; " inside a quoted value stays put.
 */
export function specErrors(message: string): string[] {
  const body = message.replace(/^(spec #\d+: )?invalid JobSpec: /, "");
  return body.split(/; (?=[A-Za-z_][\w.[\]]*: )/).filter(Boolean);
}

/** Errors with lines of their own (a batch file's): `errors`; else a spec's message cut in lines. */
const linesOf = (err: unknown): string[] | undefined => {
  const own = (err as { errors?: unknown }).errors;
  if (Array.isArray(own) && own.every((x) => typeof x === "string")) return own;
  return err instanceof PatchbayError && err.kind === "spec" ? specErrors(err.message) : undefined;
};

/** Any error thrown by a route as a problem: patchbay's by their kind, fastify's by their status. */
export function problemOf(err: unknown, bodyLimit?: number): Problem {
  if (err instanceof PatchbayError) {
    // a stored patch past the retention: gone for good, not a wrong id
    const status = err.name === "PatchGoneError" ? 410 : (STATUS_OF[err.kind] ?? 500);
    const errors = linesOf(err);
    return problem(status, status === 500 && err.kind === "internal" ? "internal error" : err.message, {
      kind: err.kind,
      ...(errors ? { errors } : {}),
    });
  }
  const fe = err as Partial<FastifyError> & {
    validation?: { instancePath?: string; message?: string }[];
    validationContext?: string;
  };
  if (fe.code === "FST_ERR_CTP_BODY_TOO_LARGE")
    return problem(
      413,
      `the request body is over this route's limit${bodyLimit ? ` of ${count(bodyLimit, "byte")}` : ""}`,
      {
        kind: "usage",
      },
    );
  if (Array.isArray(fe.validation)) {
    const errors = fe.validation.map(
      (v) =>
        `${fe.validationContext ?? "request"}${(v.instancePath ?? "").replace(/\//g, ".")}: ${v.message ?? "invalid"}`,
    );
    return problem(400, errors.join("; "), { kind: "usage", errors });
  }
  const status = typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500 ? fe.statusCode : 500;
  // a client's mistake is told as fastify words it (bad JSON, a content type); anything else is ours
  if (status < 500) return problem(status, fe.message ?? "bad request", { kind: "usage" });
  return problem(500, "internal error", { kind: kindOf(err) });
}
