// Guards that every error answer of the dashboard's server, its pages' JSON and the HTTP API alike,
// is application/problem+json (RFC 9457) whose detail names the fix: the guard's refusals (token,
// Host, Origin), a path no route has, a method the path does not take (405 with Allow), a body of a
// type the route does not take (415 naming the types it does), NDJSON sent as JSON, a body over the
// limit, a malformed URL, and a route's own refusals (src/web/errors.ts, src/web/auth.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { http, type Res } from "../support/api.js";
import { startRedis } from "../support/cluster.js";

const TOKEN = "problems-test-token-0123456789";
const LINES =
  '{"task":"a","repo":{"git":"https://example.org/a.git"}}\n{"task":"b","repo":{"git":"https://example.org/b.git"}}\n';

/** The answer is a problem of this status whose detail says `fix`. */
function expectProblem(r: Res, status: number, fix: RegExp): void {
  const where = `${r.method} ${r.path}: ${r.status} ${String(r.headers["content-type"])} ${r.text.slice(0, 300)}`;
  expect(r.status, where).toBe(status);
  expect(r.headers["content-type"], where).toMatch(/^application\/problem\+json/);
  expect(r.json, where).toMatchObject({
    status,
    title: expect.stringMatching(/^(?!Error$)[A-Z]/),
    type: expect.any(String),
  });
  expect(r.json.detail, where).toMatch(fix);
}

describe("every error answer is problem+json naming the fix", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dash: Dashboard;

  beforeAll(async () => {
    redis = await startRedis();
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: "api-problems", token: TOKEN });
  });
  afterAll(async () => {
    await dash?.close();
    await redis?.stop();
  });

  it("the guard: no token, a wrong ?token=, a foreign Host, a cross-origin write", async () => {
    const base = dash.url;
    expectProblem(await http(base, "GET", "/jobs"), 401, /\?token=/);
    expectProblem(await http(base, "GET", "/api/jobs"), 401, /Authorization: Bearer/);
    expectProblem(await http(base, "GET", "/api/v1/jobs"), 401, /Authorization: Bearer/);
    expectProblem(await http(base, "GET", "/jobs?token=not-the-token-at-all"), 401, /\?token=/);
    const host = await http(base, "GET", "/jobs", { token: TOKEN, headers: { host: "evil.example:80" } });
    expectProblem(host, 403, /http:\/\/127\.0\.0\.1:<port>/);
    expect(host.json.detail).toContain('"evil.example:80"');
    const apiHost = await http(base, "GET", "/api/v1/jobs", { token: TOKEN, headers: { host: "evil.example" } });
    expectProblem(apiHost, 403, /open it as http:\/\/127\.0\.0\.1/);
    const cross = await http(base, "POST", "/api/jobs/x/cancel", {
      token: TOKEN,
      headers: { origin: "https://evil.example" },
    });
    expectProblem(cross, 403, /from this dashboard's own pages/);
  });

  it("a path no route has is a 404 naming where the routes are; another method's path a 405 with Allow", async () => {
    const base = dash.url;
    expectProblem(await http(base, "GET", "/nope", { token: TOKEN }), 404, /\/api\/openapi\.json/);
    expectProblem(await http(base, "GET", "/api/v1/nope", { token: TOKEN }), 404, /\/api\/openapi\.json/);
    const del = await http(base, "DELETE", "/api/v1/jobs", { token: TOKEN });
    expectProblem(del, 405, /does not take DELETE: send GET or HEAD or POST/);
    expect(del.headers.allow).toBe("GET, HEAD, POST");
    const put = await http(base, "PUT", "/api/jobs/some-job/cancel", { token: TOKEN });
    expectProblem(put, 405, /send POST/);
    expect(put.headers.allow).toBe("POST");
  });

  it("a body of a type the route does not take is a 415 naming the types it does", async () => {
    const base = dash.url;
    const xml = { token: TOKEN, body: "<job/>", headers: { "content-type": "application/xml" } };
    expectProblem(await http(base, "POST", "/api/v1/jobs", xml), 415, /takes Content-Type application\/json/);
    expectProblem(
      await http(base, "POST", "/api/v1/batches", xml),
      415,
      /takes Content-Type application\/x-ndjson, application\/jsonl, text\/plain/,
    );
  });

  it("NDJSON sent as application/json gets the type to send instead", async () => {
    const base = dash.url;
    const asJson = (body: string) => ({ token: TOKEN, body, headers: { "content-type": "application/json" } });
    expectProblem(
      await http(base, "POST", "/api/v1/batches", asJson(LINES)),
      400,
      /Content-Type: application\/x-ndjson/,
    );
    // one line parses as JSON: still the lines' type
    const one = LINES.split("\n")[0]!;
    expectProblem(await http(base, "POST", "/api/v1/batches", asJson(one)), 400, /Content-Type: application\/x-ndjson/);
  });

  it("a body over the limit, a malformed URL and a route's own refusals", async () => {
    const base = dash.url;
    const big = { token: TOKEN, body: "x".repeat(2 << 20), headers: { "content-type": "application/json" } };
    expectProblem(await http(base, "POST", "/api/v1/jobs", big), 413, /limit of 1048576 bytes/);
    expectProblem(await http(base, "POST", "/api/jobs/some-job/cancel", big), 413, /limit of 1048576 bytes/);
    expectProblem(await http(base, "GET", "/jobs/%zz", { token: TOKEN }), 400, /percent-encode/);
    expectProblem(await http(base, "GET", "/api/jobs/no-such-job", { token: TOKEN }), 404, /the list at \/jobs/);
    expectProblem(await http(base, "POST", "/api/jobs/no-such-job/retry", { token: TOKEN }), 404, /the list at \/jobs/);
    expectProblem(await http(base, "GET", "/api/jobs?limit=9999", { token: TOKEN }), 400, /1 to 200/);
    expectProblem(await http(base, "GET", "/api/campaigns/nope", { token: TOKEN }), 404, /campaign list/);
  });
});
