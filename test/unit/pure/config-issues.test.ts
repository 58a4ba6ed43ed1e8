// Guards that a bad environment variable is reported in a sentence naming the variable and its bound
// (src/core/config/env-issues.ts), for every variable loadConfig reads: never the validation
// library's raw "Too small: expected number to be >=60".
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig, telemetryConfig } from "../../../src/core/config/config.js";

const RAW = /Too (small|big)|Invalid (input|option|string|type)|expected \w+ to (be|have)|received NaN|[<>]=?\d/;
const source = readFileSync(resolve(import.meta.dirname, "../../../src/core/config/config.ts"), "utf8");
/** Every variable the schema of config.ts names (its keys are the variables). */
const VARIABLES = [
  ...new Set([...source.matchAll(/^ {4}((?:PATCHBAY|OTEL|REDIS|ANTHROPIC|DOCKER)_?\w*):/gm)].map((m) => m[1]!)),
];

const failure = (env: NodeJS.ProcessEnv, load: (e: NodeJS.ProcessEnv) => unknown = loadConfig) => {
  try {
    load(env);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
};

describe("config errors", () => {
  it("says PATCHBAY_RETENTION_SEC's bound in a sentence naming it", () => {
    expect(failure({ PATCHBAY_RETENTION_SEC: "30" })).toBe(
      "bad environment: PATCHBAY_RETENTION_SEC: must be a number of at least 60",
    );
    expect(failure({ PATCHBAY_RETENTION_SEC: "1.5" })).toBe(
      "bad environment: PATCHBAY_RETENTION_SEC: must be a whole number (no fraction)",
    );
    expect(failure({ PATCHBAY_CONCURRENCY: "0" })).toBe(
      "bad environment: PATCHBAY_CONCURRENCY: must be a number greater than 0",
    );
    expect(failure({ PATCHBAY_QUEUE: "" })).toBe("bad environment: PATCHBAY_QUEUE: must not be empty");
    expect(failure({ PATCHBAY_ALLOW_PTRACE: "yes" })).toBe(
      'bad environment: PATCHBAY_ALLOW_PTRACE: must be one of "0", "1"',
    );
  });

  it("reports every variable's bad values in patchbay's words, naming the variable", () => {
    expect(VARIABLES.length).toBeGreaterThan(30);
    const raw: string[] = [];
    for (const name of VARIABLES)
      for (const value of ["-1", "abc", "", "1.5", "0", "99999999999999999999", "x".repeat(300)]) {
        const message = failure({ [name]: value }) ?? failure({ [name]: value }, telemetryConfig);
        if (message === undefined) continue;
        if (RAW.test(message) || !message.includes(name))
          raw.push(`${name}=${JSON.stringify(value.slice(0, 20))}: ${message}`);
      }
    expect(raw).toEqual([]);
  });
});
