// Guards the words of the server's error answers without a server (src/web/errors.ts): a 405 is told
// from a 404 by the routes' patterns, a 415 names the route's content types, and NDJSON sent as JSON
// to a route that takes lines is told the type to send. The server itself: test/integration/api-problems.test.ts.
import { describe, expect, it } from "vitest";
import { problemFor, RouteIndex } from "../../../src/web/errors.js";

describe("RouteIndex", () => {
  it("gives the methods some route takes at a concrete path, its parameters and wildcards matched", () => {
    const index = new RouteIndex();
    index.add({ method: ["GET", "HEAD"], url: "/api/v1/jobs/:id" });
    index.add({ method: "POST", url: "/api/v1/jobs/:id/cancel" });
    index.add({ method: "POST", url: "/api/v1/jobs" });
    index.add({ method: "GET", url: "/queues/*" });
    index.add({ method: "GET", url: "/a.b" });
    expect(index.methodsAt("/api/v1/jobs/j-1")).toEqual(["GET", "HEAD"]);
    expect(index.methodsAt("/api/v1/jobs/j-1/cancel")).toEqual(["POST"]);
    expect(index.methodsAt("/api/v1/jobs/")).toEqual(["POST"]);
    expect(index.methodsAt("/queues/api/x")).toEqual(["GET"]);
    expect(index.methodsAt("/aXb")).toEqual([]); // a dot is a dot
    expect(index.methodsAt("/api/v1/jobs/a/b")).toEqual([]);
  });
});

describe("problemFor", () => {
  const unsupported = Object.assign(new Error("Unsupported Media Type: application/xml"), {
    code: "FST_ERR_CTP_INVALID_MEDIA_TYPE",
    statusCode: 415,
  });
  const badJson = Object.assign(new Error("Body is not valid JSON but content-type is set to 'application/json'"), {
    code: "FST_ERR_CTP_INVALID_JSON_BODY",
    statusCode: 400,
  });
  const lines = ["application/x-ndjson", "application/jsonl", "text/plain"];

  it("a 415 names the types the route takes", () => {
    const p = problemFor(unsupported, { accepts: ["application/json"], contentType: "application/xml; charset=x" });
    expect(p).toMatchObject({ status: 415, title: "Unsupported Media Type" });
    expect(p.detail).toBe(
      "Content-Type application/xml is not taken here: this route takes Content-Type application/json",
    );
    expect(problemFor(unsupported, { accepts: lines }).detail).toBe(
      "the body has no Content-Type: this route takes Content-Type application/x-ndjson, application/jsonl, text/plain",
    );
  });

  it("bad JSON to a route that takes lines says to send application/x-ndjson; to a JSON route it stays fastify's words", () => {
    const p = problemFor(badJson, { accepts: lines, contentType: "application/json" });
    expect(p.status).toBe(400);
    expect(p.detail).toMatch(/looks like NDJSON .* send it with Content-Type: application\/x-ndjson$/);
    expect(problemFor(badJson, { accepts: ["application/json"], contentType: "application/json" }).detail).toBe(
      badJson.message,
    );
  });
});
