// OpenTelemetry's standard variables as patchbay's TelemetryConfig (src/observability/telemetry.ts sets the SDK
// up from it): the schemas of the values and what they add up to. Pure; src/core/config/config.ts reads them.
import { z } from "zod";

/** Where a process's traces go: off unless an OTLP endpoint is set, and not disabled. */
export interface TelemetryConfig {
  /** Whether traces are exported (an endpoint is set, OTEL_SDK_DISABLED is not, the exporter is otlp). */
  enabled: boolean;
  /** The traces endpoint, whole (`…/v1/traces`). */
  url?: string;
  /** Headers of every export (OTEL_EXPORTER_OTLP_HEADERS and the traces' own); they may hold secrets. */
  headers: Record<string, string>;
  /** The service.name resource attribute (OTEL_SERVICE_NAME). */
  serviceName: string;
  /** Other resource attributes (OTEL_RESOURCE_ATTRIBUTES). */
  resourceAttributes: Record<string, string>;
  /** How long spans are batched before an export, in ms (OTEL_BSP_SCHEDULE_DELAY). */
  scheduleDelayMs: number;
}

/** The OTEL_* variables as parsed (src/core/config/config.ts's OTEL_ENV). */
export interface OtelVars {
  OTEL_SDK_DISABLED?: string;
  OTEL_TRACES_EXPORTER?: string;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_HEADERS: Record<string, string>;
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: Record<string, string>;
  OTEL_SERVICE_NAME?: string;
  OTEL_RESOURCE_ATTRIBUTES: Record<string, string>;
  OTEL_BSP_SCHEDULE_DELAY: number;
}

/** The variables as TelemetryConfig: a signal's own endpoint whole, the general one with /v1/traces added. */
export function telemetryOf(e: OtelVars): TelemetryConfig {
  const exporters = (e.OTEL_TRACES_EXPORTER ?? "otlp")
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
  const url =
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (e.OTEL_EXPORTER_OTLP_ENDPOINT && `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces`);
  const disabled = e.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true" || !exporters.includes("otlp");
  return {
    enabled: Boolean(url) && !disabled,
    ...(url ? { url } : {}),
    headers: { ...e.OTEL_EXPORTER_OTLP_HEADERS, ...e.OTEL_EXPORTER_OTLP_TRACES_HEADERS },
    serviceName: e.OTEL_SERVICE_NAME ?? "patchbay",
    resourceAttributes: e.OTEL_RESOURCE_ATTRIBUTES,
    scheduleDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
  };
}

export function httpUrl() {
  return z.string().refine((s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol), {
    error: "must be an http:// or https:// URL",
  });
}

/** `key=value,key2=value2`, values percent-decoded (OTel's format for headers and resource attributes). A bad list's message shows no value when `secret` (headers). */
export function keyValues(secret: boolean) {
  return z
    .string()
    .optional()
    .transform((s, ctx) => {
      const out: Record<string, string> = {};
      for (const pair of (s ?? "")
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean)) {
        const at = pair.indexOf("=");
        const key = at > 0 ? pair.slice(0, at).trim() : "";
        let value: string | undefined;
        try {
          value = decodeURIComponent(pair.slice(at + 1).trim());
        } catch {
          value = undefined;
        }
        if (!/^[A-Za-z0-9_.-]{1,128}$/.test(key) || value === undefined) {
          ctx.issues.push({
            code: "custom",
            message: "must be key=value pairs separated by commas (values percent-encoded)",
            input: secret ? "(not shown)" : s,
          });
          return {};
        }
        out[key] = value;
      }
      return out;
    });
}
