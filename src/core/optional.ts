// What only some deployments use (Bedrock, Vertex, the forges' APIs, OpenTelemetry export, the
// dashboard and HTTP API) is an optional peer dependency: `npm i patchbay` leaves it out. Each
// site loads its packages here, on first use, with a dynamic import; when one is missing, the
// error names the feature and the exact `npm i ...` that installs what it needs.
import { kinded } from "./errors.js";

/** A feature whose packages are optional: what it is called in messages, and what it needs installed. */
export interface OptionalFeature {
  /** Its name in a sentence: "Bedrock", "the dashboard". */
  name: string;
  /** Every package the feature needs (the npm command installs them all at once). */
  packages: readonly string[];
}

/** The optional features, each with the packages `npm i` must add for it (docs/operations.md has the table). */
export const OPTIONAL = {
  bedrock: { name: "Bedrock (PATCHBAY_PROVIDER=bedrock)", packages: ["@anthropic-ai/bedrock-sdk"] },
  vertex: {
    name: "Vertex AI (PATCHBAY_PROVIDER=vertex)",
    packages: ["@anthropic-ai/vertex-sdk", "google-auth-library"],
  },
  github: {
    name: "publishing to GitHub",
    packages: ["@octokit/rest", "@octokit/plugin-retry", "@octokit/plugin-throttling"],
  },
  gitlab: { name: "publishing to GitLab", packages: ["@gitbeaker/rest", "@gitbeaker/requester-utils"] },
  otel: {
    name: "OpenTelemetry export (OTEL_EXPORTER_OTLP_*)",
    packages: [
      "@opentelemetry/sdk-trace",
      "@opentelemetry/context-async-hooks",
      "@opentelemetry/core",
      "@opentelemetry/resources",
      "@opentelemetry/exporter-trace-otlp-proto",
      "@opentelemetry/semantic-conventions",
    ],
  },
  dashboard: {
    name: "the dashboard and HTTP API (patchbay dashboard)",
    packages: ["fastify", "@fastify/swagger", "fastify-type-provider-zod", "@bull-board/api", "@bull-board/fastify"],
  },
  credentials: { name: "egress credentials (PATCHBAY_EGRESS_CREDENTIALS)", packages: ["@peculiar/x509"] },
} as const satisfies Record<string, OptionalFeature>;

/** An optional feature was used without its packages installed: the message names the command that installs them. */
export class MissingPackageError extends kinded("config") {}

/** The bare package a specifier names: `@scope/name` or `name`, without a subpath. */
function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

/** The package Node could not find, from an import's error (ERR_MODULE_NOT_FOUND names it in its message). */
function missingPackage(err: unknown, packages: readonly string[]): string | undefined {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e?.code !== "ERR_MODULE_NOT_FOUND" || typeof e.message !== "string") return undefined;
  const named = /Cannot find (?:package|module) '([^']+)'/.exec(e.message)?.[1];
  if (named === undefined) return undefined;
  const pkg = named.startsWith("/") || named.startsWith(".") ? undefined : packageOf(named);
  return pkg !== undefined && packages.includes(pkg) ? pkg : undefined;
}

/**
 * Runs `load` (the feature's dynamic imports); when it fails because one of the feature's packages
 * is not installed, throws a MissingPackageError naming the feature and the `npm i` command for all
 * its packages. Any other failure (a package installed but broken, a bug) is thrown as it is.
 */
export async function loadOptional<T>(feature: OptionalFeature, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    const pkg = missingPackage(err, feature.packages);
    if (pkg === undefined) throw err;
    throw new MissingPackageError(
      `${feature.name} needs the package ${pkg}, which is not installed (it is optional: a default install leaves it out). ` +
        `Install what it needs with: npm i ${feature.packages.join(" ")}`,
      { cause: err },
    );
  }
}
