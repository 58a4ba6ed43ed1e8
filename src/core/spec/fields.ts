// Field builders for the contract's zod schemas, each carrying its own human message, so a bad
// JobSpec is described in one readable line per field. Pure.
import { z } from "zod";

// ---------------------------------------------------------------------------------------------
// Error messages
// ---------------------------------------------------------------------------------------------

export const REQUIRED = "required";

/** A short, safe rendering of a bad value for an error message (never the whole input). */
export function show(value: unknown): string {
  if (value === undefined) return "undefined";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
    case "number":
    case "boolean":
      return String(value);
    case "bigint":
      return `${value}n`;
    case "object":
      return "an object";
    default:
      return `a ${typeof value}`;
  }
}

type RawIssue = { code?: string; input?: unknown } & Record<string, unknown>;

/** Schema-level message: "required" when absent, else "must be <what> (got <value>)". */
export const expected = (what: string) => (iss: RawIssue) =>
  iss.input === undefined ? REQUIRED : `must be ${what} (got ${show(iss.input)})`;

export const A_TYPE: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  object: "an object",
  array: "an array",
};

/** Fallback for schemas without their own message: plain words instead of zod's defaults. */
export function genericMessage(iss: RawIssue): string | undefined {
  if (iss.input === undefined && iss.code !== "unrecognized_keys") return REQUIRED;
  switch (iss.code) {
    case "invalid_type": {
      const want = String(iss.expected);
      return `must be ${A_TYPE[want] ?? want} (got ${show(iss.input)})`;
    }
    case "invalid_value":
      return `must be one of ${(iss.values as unknown[]).map(String).join(", ")} (got ${show(iss.input)})`;
    case "too_small":
    case "too_big": {
      const op = iss.code === "too_small" ? (iss.inclusive ? ">=" : ">") : iss.inclusive ? "<=" : "<";
      const bound = iss.code === "too_small" ? iss.minimum : iss.maximum;
      return `must be ${op} ${String(bound)} (got ${show(iss.input)})`;
    }
    default:
      return undefined; // zod's own message
  }
}

// ---------------------------------------------------------------------------------------------
// Field builders (each carries its own human message)
// ---------------------------------------------------------------------------------------------

export const nonEmpty = (what: string) =>
  z.string({ error: expected(what) }).refine((s) => s.trim() !== "", { error: expected(what) });

export const positiveNumber = () => {
  const error = expected("a positive number");
  return z.number({ error }).positive({ error });
};

export const positiveInt = () => {
  const error = expected("a positive integer");
  return z.int({ error }).positive({ error });
};

export const intRange = (lo: number, hi: number) => {
  const error = expected(`an integer from ${lo} to ${hi}`);
  return z.int({ error }).min(lo, { error }).max(hi, { error });
};

export const nonNegInt = () => {
  const error = expected("a non-negative integer");
  return z.int({ error }).nonnegative({ error });
};

export const nonNegNumber = () => {
  const error = expected("a non-negative number");
  return z.number({ error }).nonnegative({ error });
};
