// Traces' pure parts, no services: the OTEL_* variables as config; the attribute builders (names,
// counts, sizes; the model's and the API's words bounded); the API with no SDK (nothing recorded,
// nothing injected, nothing registered); with an in-memory SDK, the span helpers' nesting, carriers,
// links and error kinds; and test/support/otlp-receiver.ts's decoder against otlp-transformer's
// own protobuf serializer.
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { describe, expect, it } from "vitest";
import { loadConfig, telemetryConfig } from "../../src/core/config/config.js";
import { PatchbayError } from "../../src/core/errors.js";
import { emptyResult } from "../../src/core/spec/spec.js";
import { startTelemetry } from "../../src/observability/telemetry.js";
import {
  carrierOf,
  enqueueSpans,
  ensureSpan,
  inSpan,
  modelId,
  modelRequestAttrs,
  modelResponseAttrs,
  pointSpan,
  resultAttrs,
  toolAttrs,
  toolResultAttrs,
} from "../../src/observability/trace.js";
import { decodeTraces } from "../support/otlp-receiver.js";

describe("the OTEL_* variables (src/core/config/config.ts)", () => {
  it("off unless an endpoint is set", () => {
    expect(telemetryConfig({})).toEqual({
      enabled: false,
      headers: {},
      serviceName: "patchbay",
      resourceAttributes: {},
      scheduleDelayMs: 5000,
    });
    expect(loadConfig({}).telemetry.enabled).toBe(false);
    expect(telemetryConfig({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_EXPORTER: "otlp" }).enabled).toBe(false);
  });

  it("the general endpoint gets /v1/traces; the traces endpoint is taken whole and wins", () => {
    expect(telemetryConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" })).toMatchObject({
      enabled: true,
      url: "http://c:4318/v1/traces",
    });
    expect(
      telemetryConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://t/x",
      }),
    ).toMatchObject({ enabled: true, url: "https://t/x" });
  });

  it("OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER without otlp turn it off", () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    expect(telemetryConfig({ ...on, OTEL_SDK_DISABLED: "TRUE" }).enabled).toBe(false);
    expect(telemetryConfig({ ...on, OTEL_SDK_DISABLED: "false" }).enabled).toBe(true);
    expect(telemetryConfig({ ...on, OTEL_TRACES_EXPORTER: "none" }).enabled).toBe(false);
    expect(telemetryConfig({ ...on, OTEL_TRACES_EXPORTER: "console, otlp" }).enabled).toBe(true);
  });

  it("headers, resource attributes, the service name and the batch delay", () => {
    const t = telemetryConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20abc, x-a=1",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-a=2",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,host.name=w1",
      OTEL_SERVICE_NAME: "fixers",
      OTEL_BSP_SCHEDULE_DELAY: "200",
    });
    expect(t).toEqual({
      enabled: true,
      url: "http://c:4318/v1/traces",
      headers: { authorization: "Bearer abc", "x-a": "2" },
      serviceName: "fixers",
      resourceAttributes: { "deployment.environment": "prod", "host.name": "w1" },
      scheduleDelayMs: 200,
    });
  });

  it("a bad value is an error naming the variable; a header's value is never shown", () => {
    expect(() => telemetryConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "grpc://c:4317" })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT: must be an http/,
    );
    expect(() => telemetryConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL: only http\/protobuf/,
    );
    expect(() => telemetryConfig({ OTEL_BSP_SCHEDULE_DELAY: "soon" })).toThrow(/OTEL_BSP_SCHEDULE_DELAY/);
    let message = "";
    try {
      loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: "authorization=s3cret-token,broken" });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^bad environment: OTEL_EXPORTER_OTLP_HEADERS: must be key=value pairs/);
    expect(message).not.toContain("s3cret");
  });
});

describe("the attribute builders (src/observability/trace.ts)", () => {
  it("model ids that look like ids, else other", () => {
    expect(modelId("claude-sonnet-5-5")).toBe("claude-sonnet-5-5");
    expect(modelId("a model with spaces")).toBe("other");
    expect(modelId("x".repeat(101))).toBe("other");
    expect(modelId(undefined)).toBe("other");
  });

  it("a model request and its answer: tokens, cost, the stop reason; an unknown cost left out", () => {
    expect(modelRequestAttrs("claude-sonnet-5-5", 3)).toEqual({
      "gen_ai.operation.name": "chat",
      "gen_ai.system": "anthropic",
      "gen_ai.request.model": "claude-sonnet-5-5",
      "patchbay.turn": 3,
    });
    const usage = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 2, cacheWriteTokens: 1 };
    expect(modelResponseAttrs({ model: "claude-x", usage, stopReason: "tool_use" }, 0.25)).toEqual({
      "gen_ai.response.model": "claude-x",
      "gen_ai.usage.input_tokens": 10,
      "gen_ai.usage.output_tokens": 5,
      "patchbay.usage.cache_read_tokens": 2,
      "patchbay.usage.cache_write_tokens": 1,
      "patchbay.cost_usd": 0.25,
      "gen_ai.response.finish_reasons": ["tool_use"],
    });
    const odd = modelResponseAttrs(
      { model: "evil model", usage, stopReason: "Ignore previous instructions" },
      undefined,
    );
    expect(odd["gen_ai.response.model"]).toBe("other");
    expect(odd).not.toHaveProperty("gen_ai.response.finish_reasons");
    expect(odd).not.toHaveProperty("patchbay.cost_usd");
  });

  it("a tool's name only when the job offered it; its time, error flag and output size, not its output", () => {
    const offered = new Set(["bash", "str_replace_based_edit_tool"]);
    expect(toolAttrs("bash", offered, 2)).toEqual({ "gen_ai.tool.name": "bash", "patchbay.turn": 2 });
    expect(toolAttrs("CANARY_tool", offered, 2)["gen_ai.tool.name"]).toBe("other");
    expect(toolResultAttrs({ durationMs: 12.6, isError: true, content: "secret output" })).toEqual({
      "patchbay.tool.ms": 13,
      "patchbay.tool.error": true,
      "patchbay.tool.output_chars": 13,
    });
  });

  it("a result: status, counts, cost, verify's exit code; no patch, summary or error text", () => {
    const r = {
      ...emptyResult("verify_failed", "the secret error"),
      summary: "the secret summary",
      patch: "diff secret",
      filesChanged: ["a", "b"],
      verify: { exitCode: 3, outputTail: "secret tail" },
      verified: false,
      turns: 4,
      costUsd: 0.5,
    };
    const a = resultAttrs(r);
    expect(a).toMatchObject({
      "patchbay.status": "verify_failed",
      "patchbay.turns": 4,
      "patchbay.cost_usd": 0.5,
      "patchbay.files_changed": 2,
      "patchbay.verified": false,
      "patchbay.verify.exit_code": 3,
    });
    expect(JSON.stringify(a)).not.toMatch(/secret/);
  });
});

describe("with no SDK registered", () => {
  it("spans do nothing: fn runs, nothing is recorded or injected, and tracing off registers nothing", async () => {
    expect(
      await startTelemetry(
        telemetryConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", OTEL_SDK_DISABLED: "true" }),
      ),
    ).toBeUndefined();
    const inside = await inSpan("x", {}, async (span) => ({ recording: span.isRecording(), carrier: carrierOf() }));
    expect(inside).toEqual({ recording: false, carrier: undefined });
    const carriers: unknown[] = [];
    expect(await enqueueSpans("q", 2, async (c) => (carriers.push(...c), ["1", "2"]))).toEqual(["1", "2"]);
    expect(carriers).toEqual([undefined, undefined]);
    // The global provider is still the API's proxy with no SDK behind it.
    expect(trace.getTracer("probe").startSpan("probe").isRecording()).toBe(false);
  });
});

describe("with an SDK (in memory)", () => {
  const setUp = () => {
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": "t" }),
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
    });
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const tearDown = async () => {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    };
    return { exporter, tearDown };
  };

  it("nests spans across awaits, carries the context in a job's data, links, marks errors by kind only; the receiver decodes what the SDK's serializer makes", async () => {
    const { exporter, tearDown } = setUp();
    try {
      let carrier: { traceparent?: string } | undefined;
      await enqueueSpans("q", 1, async ([c]) => ((carrier = c), ["7"]));
      expect(carrier?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      await inSpan(
        "attempt",
        { "patchbay.attempt": 2 },
        async () => {
          await inSpan("child", {}, async () => pointSpan("leaf", { n: 1 }));
          await inSpan("fails", {}, async () => {
            throw new PatchbayError("repo", "the secret path /home/x");
          }).catch(() => {});
        },
        {
          parent: carrier!,
          links: [
            { traceparent: carrier!.traceparent!, attributes: { "patchbay.link": "previous_attempt" } },
            { traceparent: "garbage" },
          ],
        },
      );
      // runJob alone gets a span of its own; under an attempt, none more.
      await ensureSpan("alone", {}, async () => pointSpan("in-alone", {}));
      await inSpan("outer", {}, () => ensureSpan("not-made", {}, async () => pointSpan("in-outer", {})));
      const spans = exporter.getFinishedSpans();
      const by = (n: string) => spans.find((s) => s.name === n)!;
      const enq = by("patchbay.enqueue");
      expect(enq.attributes["patchbay.job.id"]).toBe("7");
      expect(by("attempt").parentSpanContext?.spanId).toBe(enq.spanContext().spanId);
      expect(by("attempt").spanContext().traceId).toBe(enq.spanContext().traceId);
      expect(by("child").parentSpanContext?.spanId).toBe(by("attempt").spanContext().spanId);
      expect(by("leaf").parentSpanContext?.spanId).toBe(by("child").spanContext().spanId);
      expect(by("attempt").links.map((l) => l.context.spanId)).toEqual([enq.spanContext().spanId]);
      expect(by("in-alone").parentSpanContext?.spanId).toBe(by("alone").spanContext().spanId);
      expect(by("in-outer").parentSpanContext?.spanId).toBe(by("outer").spanContext().spanId);
      expect(spans.find((s) => s.name === "not-made")).toBeUndefined();
      expect(by("fails").attributes).toEqual({ "error.type": "repo" });
      expect(by("fails").status).toEqual({ code: 2, message: "repo" });
      expect(by("fails").events).toEqual([]); // no exception event: its message could hold the repo's text

      const decoded = decodeTraces(Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!));
      expect(decoded.map((s) => [s.name, s.spanId, s.parentSpanId, s.traceId, s.kind]).sort()).toEqual(
        spans
          .map((s) => [
            s.name,
            s.spanContext().spanId,
            s.parentSpanContext?.spanId ?? "",
            s.spanContext().traceId,
            s.kind + 1,
          ])
          .sort(),
      );
      const dAttempt = decoded.find((s) => s.name === "attempt")!;
      expect(dAttempt.attributes).toEqual({ "patchbay.attempt": 2 });
      expect(dAttempt.links).toEqual([
        {
          traceId: enq.spanContext().traceId,
          spanId: enq.spanContext().spanId,
          attributes: { "patchbay.link": "previous_attempt" },
        },
      ]);
      expect(dAttempt.resource).toMatchObject({ "service.name": "t" });
      expect(decoded.find((s) => s.name === "fails")!.status).toEqual({ code: 2, message: "repo" });
      expect(decoded.find((s) => s.name === "leaf")!.attributes).toEqual({ n: 1 });
    } finally {
      await tearDown();
    }
  });
});
