// Says what is wrong with the environment in sentences that name the variable and its bound: the
// one formatter of loadConfig's (and telemetryConfig's) validation issues, so no variable reports
// the validation library's raw "Too small: expected number to be >=60". A message patchbay wrote
// itself (a custom issue) is kept as it is.
import type { z } from "zod";
import { count } from "../count.js";

/** The start of the validation library's own English messages ("Too small: expected number to be >=60"). */
const ZOD_WORDS = /^(Too (small|big)|Invalid|Expected|Number must|String must|Unrecognized)\b/;

/** What a value must be, for a number or a string of the given kind ("a whole number", "text"). */
function kindOf(origin: string | undefined, int: boolean): string {
  if (origin === "number" || origin === "int" || origin === "bigint") return int ? "a whole number" : "a number";
  if (origin === "string") return "text";
  if (origin === "array" || origin === "set") return "a list";
  return "a value";
}

/** One issue of a variable as a sentence after its name: "must be a whole number of at least 60". */
export function issueSentence(issue: z.core.$ZodIssue): string {
  // A message patchbay gave (a custom issue, or `error:` on a check) already says it in its words.
  if (!ZOD_WORDS.test(issue.message)) return issue.message;
  switch (issue.code) {
    case "too_small":
    case "too_big": {
      const bound = Number(issue.code === "too_small" ? issue.minimum : issue.maximum);
      const inclusive = issue.inclusive !== false;
      const word =
        issue.code === "too_small"
          ? inclusive
            ? "of at least"
            : "greater than"
          : inclusive
            ? "of at most"
            : "less than";
      if (issue.origin === "string")
        return issue.code === "too_small" && bound <= 1
          ? "must not be empty"
          : `must be ${word.replace("of ", "")} ${count(bound, "character")} long`;
      if (issue.origin === "array" || issue.origin === "set")
        return `must hold ${word.replace("of ", "")} ${count(bound, "entry", "entries")}`;
      return `must be ${kindOf(issue.origin, false)} ${word} ${bound}`;
    }
    case "invalid_type":
      if (issue.expected === "int") return "must be a whole number (no fraction)";
      return `must be ${kindOf(issue.expected, false)}`;
    case "invalid_value":
      return issue.values.length === 1
        ? `must be ${JSON.stringify(issue.values[0])}`
        : `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "invalid_format":
      return `must be ${issue.format === "url" ? "a URL" : `in ${issue.format} format`}`;
    case "invalid_union": {
      // Each alternative's first problem: "must be "auto" or a number of at least 0".
      const each = issue.errors.flatMap((branch) => (branch[0] ? [issueSentence(branch[0])] : []));
      return each.length ? each.map((t, i) => (i ? t.replace(/^must be /, "") : t)).join(" or ") : issue.message;
    }
    case "not_multiple_of":
      return `must be a multiple of ${String(issue.divisor)}`;
    default:
      return issue.message;
  }
}

/** Every issue as "VARIABLE: must be …", joined with "; ", after "bad environment: ". */
export function envProblem(issues: readonly z.core.$ZodIssue[]): string {
  return `bad environment: ${issues.map((i) => `${i.path.join(".") || "(the environment)"}: ${issueSentence(i)}`).join("; ")}`;
}
