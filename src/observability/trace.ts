// The job's trace, on @opentelemetry/api alone: spans around the phases (enqueue, attempt, sandbox,
// setup, model requests, tools, patch, verify, result), the trace context a job carries in its
// data, and the attributes each span holds. With no SDK registered (src/observability/telemetry.ts registers one
// only when OTEL_* asks) every call here is the API's no-op: nothing is recorded, nothing injected.
// Attributes hold names, ids, counts, durations, sizes, exit codes and error kinds, never a prompt,
// a command, a file's content or an error's message (those can carry the repo's or the model's text).
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
} from "@opentelemetry/api";
import { kindOf } from "../core/errors.js";
import type { JobResult, Usage } from "../core/spec/spec.js";

export { SpanKind };
export type { Attributes, Span };

/** The instrumentation scope of every span patchbay makes. */
export const TRACER_NAME = "patchbay";

/** W3C trace context as a job carries it in its data (from the enqueuer's span), and the newest attempt's. */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
  /** The traceparent of the job's newest attempt span: the next attempt links to it. */
  attempt?: string;
}

export interface SpanOptions {
  kind?: SpanKind;
  /** The parent, from a carrier (another process's span); default: the active span. */
  parent?: TraceCarrier;
  /** Spans this one follows from (an earlier attempt), as traceparents. */
  links?: { traceparent: string; attributes?: Attributes }[];
}

/**
 * Runs fn inside a span that is the active one meanwhile (its children nest under it), and ends it.
 * A throw marks it an error with the error's kind (src/core/errors.ts), never its message.
 */
export async function inSpan<T>(
  name: string,
  attrs: Attributes,
  fn: (span: Span) => Promise<T>,
  opts: SpanOptions = {},
): Promise<T> {
  const parent = opts.parent ? contextOf(opts.parent) : context.active();
  const links = (opts.links ?? []).flatMap((l): Link[] => {
    const sc = trace.getSpanContext(contextOf({ traceparent: l.traceparent }));
    return sc ? [{ context: sc, ...(l.attributes ? { attributes: l.attributes } : {}) }] : [];
  });
  const span = trace
    .getTracer(TRACER_NAME)
    .startSpan(name, { attributes: attrs, links, ...(opts.kind !== undefined ? { kind: opts.kind } : {}) }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    markError(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** fn under a span of its own only when nothing is traced around it (runJob alone, in a script): else fn as it is. */
export function ensureSpan<T>(name: string, attrs: Attributes, fn: () => Promise<T>): Promise<T> {
  return trace.getActiveSpan() ? fn() : inSpan(name, attrs, fn);
}

/**
 * One PRODUCER span per job being enqueued, under the caller's active span if it has one (else each
 * job is a trace of its own): `add` gets each one's carrier for the job's data, and returns the ids.
 */
export async function enqueueSpans(
  queue: string,
  count: number,
  add: (carriers: (TraceCarrier | undefined)[]) => Promise<string[]>,
): Promise<string[]> {
  const attributes: Attributes = {
    "messaging.system": "bullmq",
    "messaging.operation.type": "send",
    "messaging.destination.name": queue,
  };
  const spans = Array.from({ length: count }, () =>
    trace.getTracer(TRACER_NAME).startSpan("patchbay.enqueue", { kind: SpanKind.PRODUCER, attributes }),
  );
  try {
    const ids = await add(spans.map((s) => carrierOf(s)));
    ids.forEach((id, i) => spans[i]?.setAttribute("patchbay.job.id", id));
    return ids;
  } catch (err) {
    for (const s of spans) markError(s, err);
    throw err;
  } finally {
    for (const s of spans) s.end();
  }
}

/** A span with nothing under it: started and ended at once (the result, say). */
export function pointSpan(name: string, attrs: Attributes): void {
  trace.getTracer(TRACER_NAME).startSpan(name, { attributes: attrs }).end();
}

/** An event on the active span (sandbox_ready on the prepare span). */
export function spanEvent(name: string, attrs: Attributes): void {
  trace.getActiveSpan()?.addEvent(name, attrs);
}

/** More attributes on the active span, for what its phase learns as it goes. */
export function activeSpanAttrs(attrs: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attrs);
}

/** An error on a span: its kind only (`error.type`), as the status too. */
export function markError(span: Span, err: unknown): void {
  const kind = kindOf(err);
  span.setAttribute("error.type", kind);
  span.setStatus({ code: SpanStatusCode.ERROR, message: kind });
}

/** The active span's context as a carrier for a job's data; undefined when nothing is traced. */
export function carrierOf(span?: Span): TraceCarrier | undefined {
  const ctx = span ? trace.setSpan(context.active(), span) : context.active();
  const out: Record<string, string> = {};
  propagation.inject(ctx, out);
  return out.traceparent
    ? { traceparent: out.traceparent, ...(out.tracestate ? { tracestate: out.tracestate } : {}) }
    : undefined;
}

/** A carrier read back (from Redis: hostile input, bounded; a bad one is no parent at all). */
function contextOf(c: TraceCarrier): Context {
  const carrier: Record<string, string> = {};
  if (typeof c.traceparent === "string" && c.traceparent.length <= 64) carrier.traceparent = c.traceparent;
  if (typeof c.tracestate === "string" && c.tracestate.length <= 512) carrier.tracestate = c.tracestate;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

// ------------------------------------------------------------------------------------------------
// Attributes: what each span holds. Pure; tested without services (test/unit/telemetry-parts.test.ts).

const MODEL_ID = /^[A-Za-z0-9._:@/-]{1,100}$/;
/** A model id as an attribute: ids look like `claude-sonnet-5-5`; anything else (the API's answer is input) is "other". */
export const modelId = (m: unknown): string => (typeof m === "string" && MODEL_ID.test(m) ? m : "other");

/** A model request: the model asked for, the turn. */
export const modelRequestAttrs = (model: string, turn: number): Attributes => ({
  "gen_ai.operation.name": "chat",
  "gen_ai.system": "anthropic",
  "gen_ai.request.model": modelId(model),
  "patchbay.turn": turn,
});

/** Its answer: the model that answered, the tokens, the cost, the stop reason (the API's own words, bounded). */
export function modelResponseAttrs(
  r: { model: string; usage: Usage; stopReason: string | null },
  costUsd: number | null | undefined,
): Attributes {
  return {
    "gen_ai.response.model": modelId(r.model),
    "gen_ai.usage.input_tokens": r.usage.inputTokens,
    "gen_ai.usage.output_tokens": r.usage.outputTokens,
    "patchbay.usage.cache_read_tokens": r.usage.cacheReadTokens,
    "patchbay.usage.cache_write_tokens": r.usage.cacheWriteTokens,
    ...(typeof costUsd === "number" ? { "patchbay.cost_usd": costUsd } : {}),
    ...(r.stopReason && /^[a-z_]{1,40}$/.test(r.stopReason)
      ? { "gen_ai.response.finish_reasons": [r.stopReason] }
      : {}),
  };
}

/** A tool call: its name when it is one of the job's tools (the model chooses the name: else "other"). */
export const toolAttrs = (name: string, offered: ReadonlySet<string>, turn: number): Attributes => ({
  "gen_ai.tool.name": offered.has(name) ? name : "other",
  "patchbay.turn": turn,
});

/** How a tool call went: its time, whether it was an error, the size of its output. */
export const toolResultAttrs = (r: { durationMs: number; isError?: boolean; content: string }): Attributes => ({
  "patchbay.tool.ms": Math.round(r.durationMs),
  "patchbay.tool.error": Boolean(r.isError),
  "patchbay.tool.output_chars": r.content.length,
});

/** A job's result, on its result span and its attempt span. */
export function resultAttrs(r: JobResult): Attributes {
  return {
    "patchbay.status": r.status,
    "patchbay.turns": r.turns,
    ...(typeof r.costUsd === "number" ? { "patchbay.cost_usd": r.costUsd } : {}),
    "patchbay.files_changed": r.filesChangedTotal ?? r.filesChanged.length,
    "gen_ai.usage.input_tokens": r.usage.inputTokens,
    "gen_ai.usage.output_tokens": r.usage.outputTokens,
    "patchbay.total_ms": r.timings.totalMs,
    ...(r.verified !== undefined ? { "patchbay.verified": r.verified } : {}),
    ...(r.verify ? { "patchbay.verify.exit_code": r.verify.exitCode } : {}),
  };
}
