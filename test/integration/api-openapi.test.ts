// The HTTP API's OpenAPI document (/api/openapi.json): a valid OpenAPI 3.1 document by
// @readme/openapi-parser, generated from the contract's own zod schemas (src/core/spec/spec.ts: the same
// fields, event types and statuses, not a copy), every route in it with its problems, and the
// schemas it gives usable as validators, and the real `redocly lint` (its recommended rules) finding
// no error and no warning in it. The responses themselves are held against it in
// test/e2e/api.test.ts.
import { compileErrors, validate } from "@readme/openapi-parser";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { EVENT_TYPES, JOB_STATUSES, JobResult, JobSpec } from "../../src/core/spec/spec.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { fetchDocument, http, type ApiDocument } from "../support/api.js";
import { startRedis } from "../support/cluster.js";

const ROUTES = [
  "GET /api/v1/batches",
  "GET /api/v1/batches/{id}",
  "GET /api/v1/batches/{id}/summary",
  "GET /api/v1/evals",
  "GET /api/v1/evals/{name}",
  "GET /api/v1/jobs",
  "GET /api/v1/jobs/{id}",
  "GET /api/v1/jobs/{id}/events",
  "GET /api/v1/jobs/{id}/patch",
  "GET /api/v1/jobs/{id}/transcript",
  "POST /api/v1/batches",
  "POST /api/v1/batches/{id}/cancel",
  "POST /api/v1/batches/{id}/retry",
  "POST /api/v1/jobs",
  "POST /api/v1/jobs/{id}/cancel",
];

const TOKEN = "openapi-test-token-0123456789";

describe("the OpenAPI document", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dash: Dashboard;
  let doc: ApiDocument;

  beforeAll(async () => {
    redis = await startRedis();
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: "api-openapi", token: TOKEN });
    doc = await fetchDocument(dash.url, TOKEN);
  });
  afterAll(async () => {
    await dash?.close();
    await redis?.stop();
  });

  it("is served at /api/openapi.json to a token's holder (a read like any other), and is a valid OpenAPI 3.1 document", async () => {
    expect((await http(dash.url, "GET", "/api/openapi.json")).status).toBe(401);
    const r = await http(dash.url, "GET", "/api/openapi.json", { token: TOKEN });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^application\/json/);
    expect(doc.raw.openapi).toBe("3.1.0");
    const result = await validate(structuredClone(doc.raw));
    if (!result.valid) throw new Error(compileErrors(result));
    expect(result.valid).toBe(true);
  });

  it("has every route of /api/v1, each with an operationId, a tag and its problems as application/problem+json", () => {
    const ops = Object.entries(doc.raw.paths as Record<string, Record<string, any>>).flatMap(([path, methods]) =>
      Object.entries(methods).map(([m, op]) => ({ route: `${m.toUpperCase()} ${path}`, op })),
    );
    expect(ops.map((o) => o.route).sort()).toEqual(ROUTES);
    for (const { route, op } of ops) {
      expect(op.operationId, route).toMatch(/^[a-z][A-Za-z]+$/);
      expect(op.tags, route).toHaveLength(1);
      expect(Object.keys(op.responses).filter((s) => s.startsWith("2")).length, route).toBeGreaterThan(0);
      expect(op.responses["401"]?.content?.["application/problem+json"]?.schema, route).toEqual({
        $ref: "#/components/schemas/Problem",
      });
      if (route.startsWith("POST")) expect(op.responses["403"], `${route}: a read token's refusal`).toBeDefined();
    }
    expect(doc.raw.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("takes its schemas from src/core/spec/spec.ts: JobSpec's fields, JobResult's, every event type and status", () => {
    const c = doc.raw.components.schemas;
    expect(Object.keys(c.JobSpecInput.properties).sort()).toEqual(Object.keys(JobSpec.shape).sort());
    expect(c.JobSpecInput.additionalProperties).toBe(false); // strict, as the spec is
    expect(Object.keys(c.JobResult.properties).sort()).toEqual(Object.keys(JobResult.shape).sort());
    expect(c.JobResult.properties.status.enum).toEqual([...JOB_STATUSES]);
    const variants = (c.TranscriptEvent.oneOf ?? c.TranscriptEvent.anyOf) as {
      properties: { type: { const: string } };
    }[];
    expect(variants.map((v) => v.properties.type.const)).toEqual(EVENT_TYPES);
    // the request body of POST /api/v1/jobs is that JobSpec
    expect(doc.raw.paths["/api/v1/jobs"].post.requestBody.content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/JobSpecInput",
    });
    // a job_started event carries the spec it ran: the same component, referenced
    expect(JSON.stringify(c.TranscriptEvent)).toContain("#/components/schemas/JobSpec");
  });

  it("its schemas validate what the contract accepts and refuse what it refuses", () => {
    const spec = z.fromJSONSchema(doc.deref.components.schemas.JobSpecInput);
    const good = {
      task: "Fix it.",
      repo: { git: "https://example.org/r.git", ref: "main" },
      verify: "npm test",
      budget: { usd: 1 },
      limits: { memoryMb: 512 },
    };
    expect(JobSpec.safeParse(good).success).toBe(true);
    expect(spec.safeParse(good).success).toBe(true);
    for (const bad of [
      { task: "no repo" },
      { task: "t", repo: { path: "/r" }, verfiy: "x" },
      { task: "t", repo: { path: "/r", git: "u" } },
      { task: "t", repo: { path: "/r" }, maxTurns: 0 },
    ]) {
      expect(JobSpec.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
      expect(spec.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    }
  });

  it("passes `redocly lint` (the recommended rules) with no error and no warning", async () => {
    const dir = mkdtempSync(join(tmpdir(), "patchbay-openapi-"));
    try {
      const file = join(dir, "openapi.json");
      writeFileSync(file, JSON.stringify(doc.raw, null, 2));
      // The JSON report: the totals and each problem, apart from redocly's own banners (on stderr).
      const out = await new Promise<{ code: number; stdout: string }>((resolve) =>
        execFile(
          join(process.cwd(), "node_modules/.bin/redocly"),
          ["lint", "--format=json", file],
          { env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" } },
          (err, stdout) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout }),
        ),
      );
      const report = JSON.parse(out.stdout) as { totals: Record<string, number>; problems: unknown[] };
      const said = (report.problems as { ruleId?: string; message?: string }[]).map((p) => `${p.ruleId}: ${p.message}`);
      expect(said).toEqual([]);
      expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
      expect(out.code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("describes the headers the API reads and sets: Location on a POST that makes something, Last-Event-ID on the live transcript", () => {
    for (const path of ["/api/v1/jobs", "/api/v1/batches"])
      for (const status of ["200", "201"])
        expect(doc.raw.paths[path].post.responses[status].headers?.Location?.schema, `${path} ${status}`).toEqual({
          type: "string",
        });
    const params = doc.raw.paths["/api/v1/jobs/{id}/events"].get.parameters as { in: string; name: string }[];
    expect(params.filter((p) => p.in === "header").map((p) => p.name.toLowerCase())).toEqual(["last-event-id"]);
    expect(doc.raw.servers).toEqual([expect.objectContaining({ url: "/" })]);
    expect(Object.keys(doc.raw.components.schemas)).not.toContain("ProblemInput"); // unused components dropped
  });
});
