// The "next:" hints' connection flags (src/queue/hints.ts): a command printed for the reader to run
// names the Redis URL that was given (its password as ***), never a "$REDIS_URL" that may be unset
// or hold another URL, and nothing at all for the defaults.
import { describe, expect, it } from "vitest";
import { hintFlags } from "../../../src/queue/hints.js";

describe("hintFlags", () => {
  it("names nothing for the default queue and Redis", () => {
    expect(hintFlags("patchbay", "redis://127.0.0.1:6379")).toBe("");
  });

  it("prints a --redis-url given without a password as given", () => {
    expect(hintFlags("patchbay", "redis://10.0.0.5:6380")).toBe(" --redis-url redis://10.0.0.5:6380");
  });

  it('prints a --redis-url with a password redacted, not "$REDIS_URL", when the variable is unset', () => {
    const h = hintFlags("q", "redis://:hunter2@10.0.0.5:6380/2");
    expect(h).toBe(" --queue q --redis-url 'redis://:***@10.0.0.5:6380/2'");
    expect(h).not.toContain("$REDIS_URL");
    expect(h).not.toContain("hunter2");
  });
});
