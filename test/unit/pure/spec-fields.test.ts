// The field builders' human messages, exactly: show(), expected(), genericMessage(). Pure.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  A_TYPE,
  expected,
  genericMessage,
  intRange,
  nonEmpty,
  nonNegInt,
  nonNegNumber,
  positiveInt,
  positiveNumber,
  REQUIRED,
  show,
} from "../../../src/core/spec/fields.js";

const msg = (schema: z.ZodType, value: unknown) => {
  const r = schema.safeParse(value);
  return r.success ? "ok" : r.error.issues.map((i) => i.message).join("; ");
};

describe("show", () => {
  it("renders each kind of value short and safe", () => {
    expect(show(undefined)).toBe("undefined");
    expect(show(null)).toBe("null");
    expect(show([1, 2])).toBe("an array");
    expect(show("hi")).toBe('"hi"');
    expect(show("x".repeat(40))).toBe(JSON.stringify("x".repeat(40)));
    expect(show("x".repeat(41))).toBe(JSON.stringify(`${"x".repeat(40)}…`));
    expect(show(1.5)).toBe("1.5");
    expect(show(false)).toBe("false");
    expect(show(10n)).toBe("10n");
    expect(show({ a: 1 })).toBe("an object");
    expect(show(() => 1)).toBe("a function");
    expect(show(Symbol("s"))).toBe("a symbol");
  });
});

describe("expected and genericMessage", () => {
  it("expected: required when absent, else what it must be and what it got", () => {
    expect(REQUIRED).toBe("required");
    expect(expected("a thing")({ input: undefined })).toBe("required");
    expect(expected("a thing")({ input: 3 })).toBe("must be a thing (got 3)");
    expect(expected("a thing")({ input: null })).toBe("must be a thing (got null)");
  });

  it("genericMessage covers types, values, bounds and leaves the rest to zod", () => {
    expect(genericMessage({ code: "invalid_type", input: undefined })).toBe("required");
    expect(genericMessage({ code: "unrecognized_keys", input: undefined })).toBeUndefined();
    expect(genericMessage({ code: "invalid_type", expected: "int", input: "x" })).toBe('must be an integer (got "x")');
    for (const [k, v] of Object.entries(A_TYPE))
      expect(genericMessage({ code: "invalid_type", expected: k, input: 1 })).toBe(`must be ${v} (got 1)`);
    expect(genericMessage({ code: "invalid_type", expected: "date", input: 1 })).toBe("must be date (got 1)");
    expect(genericMessage({ code: "invalid_value", values: ["a", 1], input: "z" })).toBe(
      'must be one of a, 1 (got "z")',
    );
    expect(genericMessage({ code: "too_small", inclusive: true, minimum: 1, input: 0 })).toBe("must be >= 1 (got 0)");
    expect(genericMessage({ code: "too_small", inclusive: false, minimum: 0, input: 0 })).toBe("must be > 0 (got 0)");
    expect(genericMessage({ code: "too_big", inclusive: true, maximum: 9, input: 10 })).toBe("must be <= 9 (got 10)");
    expect(genericMessage({ code: "too_big", inclusive: false, maximum: 9, input: 9 })).toBe("must be < 9 (got 9)");
    expect(genericMessage({ code: "custom", input: 1 })).toBeUndefined();
  });
});

describe("field builders", () => {
  it("nonEmpty refuses blank strings and non-strings", () => {
    expect(msg(nonEmpty("a task"), "do it")).toBe("ok");
    expect(msg(nonEmpty("a task"), "  \n")).toBe('must be a task (got "  \\n")');
    expect(msg(nonEmpty("a task"), 5)).toBe("must be a task (got 5)");
    expect(msg(nonEmpty("a task"), undefined)).toBe("required");
  });

  it("numbers: positive, integer, ranges and non-negative, at their bounds", () => {
    expect(msg(positiveNumber(), 0.5)).toBe("ok");
    expect(msg(positiveNumber(), 0)).toBe("must be a positive number (got 0)");
    expect(msg(positiveNumber(), "1")).toBe('must be a positive number (got "1")');
    expect(msg(positiveInt(), 1)).toBe("ok");
    expect(msg(positiveInt(), 0)).toBe("must be a positive integer (got 0)");
    expect(msg(positiveInt(), 1.5)).toBe("must be a positive integer (got 1.5)");
    expect(msg(intRange(1, 3), 1)).toBe("ok");
    expect(msg(intRange(1, 3), 3)).toBe("ok");
    expect(msg(intRange(1, 3), 0)).toBe("must be an integer from 1 to 3 (got 0)");
    expect(msg(intRange(1, 3), 4)).toBe("must be an integer from 1 to 3 (got 4)");
    expect(msg(intRange(1, 3), 2.5)).toBe("must be an integer from 1 to 3 (got 2.5)");
    expect(msg(nonNegInt(), 0)).toBe("ok");
    expect(msg(nonNegInt(), -1)).toBe("must be a non-negative integer (got -1)");
    expect(msg(nonNegInt(), 0.5)).toBe("must be a non-negative integer (got 0.5)");
    expect(msg(nonNegNumber(), 0)).toBe("ok");
    expect(msg(nonNegNumber(), 0.25)).toBe("ok");
    expect(msg(nonNegNumber(), -0.1)).toBe("must be a non-negative number (got -0.1)");
    expect(msg(nonNegNumber(), null)).toBe("must be a non-negative number (got null)");
  });
});
