// The OpenTelemetry SDK, set up at a program's edges only (a worker's start, the CLI, a library
// script that asks): spans of src/observability/trace.ts then go to an OTLP/HTTP (protobuf) endpoint in batches.
// Off unless config.telemetry says so (OTEL_* in src/core/config/config.ts); when off, nothing here is loaded
// and the API stays the no-op it is. The SDK's packages are optional (only the API is a dependency):
// loaded on the first start, with an error naming the `npm i` that adds them when they are missing. One registration per process, shared by whoever starts it:
// the last to release it flushes and shuts it down.
import { context, propagation, trace } from "@opentelemetry/api";
import { loadConfig, type Config, type TelemetryConfig } from "../core/config/config.js";
import { loadOptional, OPTIONAL } from "../core/optional.js";

/** Tracing started by startTracing: flush it, or release it when done. */
export interface Telemetry {
  /** Exports what is buffered now. */
  flush(): Promise<void>;
  /** This user is done: the last one flushes, shuts the SDK down and unregisters it. */
  release(): Promise<void>;
}

interface Registered {
  provider: { forceFlush(): Promise<void>; shutdown(): Promise<void> };
  users: number;
}

let registered: Promise<Registered | undefined> | undefined;

/**
 * Registers the SDK (once per process) when `t.enabled`; undefined when tracing is off, or when the
 * program registered a tracer provider of its own (its SDK then gets patchbay's spans).
 */
export async function startTelemetry(t: TelemetryConfig): Promise<Telemetry | undefined> {
  if (!t.enabled || !t.url) return undefined;
  registered ??= register(t);
  const r = await registered;
  if (!r) return undefined;
  r.users++;
  let released = false;
  return {
    flush: () => r.provider.forceFlush(),
    release: async () => {
      if (released) return;
      released = true;
      if (--r.users > 0) return r.provider.forceFlush();
      registered = undefined;
      await r.provider.shutdown().catch(() => {});
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** For a script with no SDK of its own: patchbay's spans (enqueue, a worker's) exported as OTEL_* says; undefined when off. */
export const startTracing = (config: Pick<Config, "telemetry"> = loadConfig()): Promise<Telemetry | undefined> =>
  startTelemetry(config.telemetry);

async function register(t: TelemetryConfig): Promise<Registered | undefined> {
  const [
    { TracerProvider, BatchSpanProcessor },
    { AsyncLocalStorageContextManager },
    { W3CTraceContextPropagator },
    { resourceFromAttributes },
    { OTLPTraceExporter },
    { ATTR_SERVICE_NAME },
  ] = await loadOptional(OPTIONAL.otel, () =>
    Promise.all([
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/core"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/exporter-trace-otlp-proto"),
      import("@opentelemetry/semantic-conventions"),
    ]),
  );
  const exporter = new OTLPTraceExporter({ url: t.url, headers: t.headers });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ ...t.resourceAttributes, [ATTR_SERVICE_NAME]: t.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: t.scheduleDelayMs })],
  });
  // A program with an SDK of its own keeps it: the API refuses a second provider.
  if (!trace.setGlobalTracerProvider(provider)) {
    await provider.shutdown();
    return undefined;
  }
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  return { provider, users: 0 };
}
