// Task sets and predictions (src/eval/instance.ts, src/eval/records.ts): SWE-bench's formats read
// as its dataset has them, patchbay's own fields checked strictly, hostile input bounded, and every
// problem of a file named `file:line: field: what (got …)` in one EvalSetError. Pure: no I/O.
import { describe, expect, it } from "vitest";
import {
  EvalSetError,
  MAX_INSTANCES,
  MAX_PATCH_BYTES,
  MAX_SET_BYTES,
  MAX_TESTS_PER_LIST,
  parsePredictions,
  parseTaskSet,
  resolveRepo,
} from "../../../src/eval/instance.js";
import { safeText } from "../../../src/core/term.js";

const instance = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  instance_id: "acme__calc-1",
  repo: "acme/calc",
  base_commit: "0123456789abcdef0123456789abcdef01234567",
  problem_statement: "Division by zero crashes the calculator.",
  test_patch: "diff --git a/t.py b/t.py\n",
  FAIL_TO_PASS: ["test_div (tests.CalcTest.test_div)"],
  PASS_TO_PASS: [],
  patchbay: { repo: "./repos/calc", test: { command: "python3 -m unittest -v", format: "unittest" } },
  ...over,
});
const jsonl = (...items: unknown[]) => items.map((i) => JSON.stringify(i)).join("\n") + "\n";

/** The problems an EvalSetError lists for `text`, read as a task set or as predictions. */
function problems(text: string, read: (t: string, f: string) => unknown = parseTaskSet): string[] {
  try {
    read(text, "set.jsonl");
  } catch (err) {
    expect(err).toBeInstanceOf(EvalSetError);
    return (err as EvalSetError).problems;
  }
  throw new Error("no problem found");
}

describe("parseTaskSet: SWE-bench's instance format", () => {
  it("reads JSONL and a JSON array alike, with the fields SWE-bench's dataset has", () => {
    const a = instance();
    const b = instance({ instance_id: "django__django-11099", patch: "diff --git a/x b/x\n" });
    const fromLines = parseTaskSet(jsonl(a, b));
    const fromArray = parseTaskSet(JSON.stringify([a, b], null, 2));
    expect(fromLines).toEqual(fromArray);
    expect(fromLines.map((i) => i.instance_id)).toEqual(["acme__calc-1", "django__django-11099"]);
    expect(fromLines[1]!.patch).toBe("diff --git a/x b/x\n");
    expect(fromLines[0]!.patchbay.test).toEqual({ command: "python3 -m unittest -v", format: "unittest" });
  });

  it("takes FAIL_TO_PASS and PASS_TO_PASS as JSON-encoded strings, as the HF dataset has them", () => {
    const [i] = parseTaskSet(
      jsonl(instance({ FAIL_TO_PASS: '["tests/x.py::test_a"]', PASS_TO_PASS: '["tests/x.py::test_b", "t c"]' })),
    );
    expect(i!.FAIL_TO_PASS).toEqual(["tests/x.py::test_a"]);
    expect(i!.PASS_TO_PASS).toEqual(["tests/x.py::test_b", "t c"]);
  });

  it("accepts and drops SWE-bench's other fields", () => {
    const [i] = parseTaskSet(
      jsonl(
        instance({
          version: "3.0",
          hints_text: "",
          created_at: "2019-03-09T20:52:53Z",
          environment_setup_commit: "419a78300f7cd27611196e1e464d50fd0385ff27",
          difficulty: "15 min - 1 hour",
        }),
      ),
    );
    expect(Object.keys(i!).sort()).toEqual(
      [
        "FAIL_TO_PASS",
        "PASS_TO_PASS",
        "base_commit",
        "instance_id",
        "patchbay",
        "problem_statement",
        "repo",
        "test_patch",
      ].sort(),
    );
  });

  it("reads patchbay's whole environment: image, setup, network, the test's file and time limit", () => {
    const env = {
      repo: "https://git.example.org/acme/calc.git",
      image: "node:20",
      setup: ["npm ci"],
      network: { setup: { allow: ["npm"] } },
      test: {
        command: "node --test --test-reporter=junit > out.xml",
        format: "junit",
        file: "out.xml",
        timeoutSec: 120,
      },
    };
    const [i] = parseTaskSet(jsonl(instance({ patchbay: env })));
    expect(i!.patchbay).toEqual(env);
  });

  it("names every problem of every record at its line, values escaped", () => {
    const text = [
      JSON.stringify(instance()),
      "",
      JSON.stringify(instance({ instance_id: "../etc", base_commit: "HEAD" })),
      "{not json",
      JSON.stringify(
        instance({ instance_id: "b", FAIL_TO_PASS: "not json", patchbay: { repo: "r", test: { command: "x" } } }),
      ),
      JSON.stringify(instance({ instance_id: "c", repo: "evil\u001b]52;c;aGk=\u0007\u202e" })),
    ].join("\n");
    const p = problems(text);
    expect(p).toEqual([
      expect.stringMatching(/^set\.jsonl:3: instance_id: must be 1-128 characters .* \(got "\.\.\/etc"\)$/),
      expect.stringMatching(/^set\.jsonl:3: base_commit: must be a commit id, 7-64 hex digits \(got "HEAD"\)$/),
      expect.stringMatching(/^set\.jsonl:4: not valid JSON: /),
      expect.stringMatching(/^set\.jsonl:5: patchbay\.test\.format: required/),
      expect.stringMatching(/^set\.jsonl:5: FAIL_TO_PASS: must be a JSON array of test names.*\(got "not json"\)$/),
    ]);
    // The repo field is any text (it is shown, escaped where rendered): no problem, but had it been
    // one, the message would carry no terminal control; the message itself holds none either.
    for (const line of p) expect(safeText(line)).toBe(line);
  });

  it("escapes a control or bidi character in a value named in a problem", () => {
    const [p] = problems(jsonl(instance({ instance_id: "x\u001b[2J\u202ey" })));
    expect(p).toContain("\\u001b[2J\\u202ey");
    expect(safeText(p!)).toBe(p);
  });

  it("refuses a duplicate instance_id, naming both lines", () => {
    expect(problems(jsonl(instance(), instance({ instance_id: "other" }), instance()))).toEqual([
      'set.jsonl:3: instance_id: duplicate (got "acme__calc-1", first at line 1)',
    ]);
  });

  it("gives a JSON array's records the line each starts on", () => {
    const text = JSON.stringify([instance(), instance({ instance_id: "b", base_commit: "zz" })], null, 2);
    const start = text.split("\n").findIndex((l, i) => i > 1 && l === "  {") + 1;
    expect(problems(text)).toEqual([expect.stringMatching(new RegExp(`^set\\.jsonl:${start}: base_commit: `))]);
  });

  it("names a misspelt field, and a key patchbay's strict fields do not have", () => {
    const bad = instance({ PASS_TO_PAS: [], patchbay: { repo: "r", test: { command: "x", format: "tap", formt: 1 } } });
    delete bad.PASS_TO_PASS;
    expect(problems(jsonl(bad))).toEqual([
      'set.jsonl:1: patchbay.test.formt: unknown field (did you mean "format"?)',
      'set.jsonl:1: PASS_TO_PAS: unknown field (did you mean "PASS_TO_PASS"?)',
      "set.jsonl:1: PASS_TO_PASS: required: the test names, a JSON array (or a string holding one)",
    ]);
  });

  it("checks the network with the JobSpec's own schema, and a junit file stays inside /workspace", () => {
    const env = (over: Record<string, unknown>) => ({
      repo: "r",
      test: { command: "x", format: "junit", file: "../../etc/passwd" },
      ...over,
    });
    const p = problems(jsonl(instance({ patchbay: env({ network: { setup: { allow: ["http://x y"] } } }) })));
    expect(p).toEqual([
      expect.stringMatching(/^set\.jsonl:1: patchbay\.network\.setup\.allow\[0\]: /),
      expect.stringMatching(
        /^set\.jsonl:1: patchbay\.test\.file: must be a path relative to \/workspace, without "\.\."/,
      ),
    ]);
  });

  it("reads patchbay.verify, the agent's judge, bounded as a JobSpec's verify and named at its line", () => {
    const env = (verify: unknown) => ({ repo: "r", verify, test: { command: "x", format: "tap" } });
    const [i] = parseTaskSet(jsonl(instance({ patchbay: env("npm test -- --grep smoke") })));
    expect(i!.patchbay.verify).toBe("npm test -- --grep smoke");
    const p = problems(
      jsonl(
        instance({ patchbay: env(42) }),
        instance({ instance_id: "b", patchbay: env("") }),
        instance({ instance_id: "c", patchbay: env("x".repeat(64 * 1024 + 1)) }),
        instance({ instance_id: "d", patchbay: { ...env("true"), verfy: "true" } }),
      ),
    );
    expect(p).toEqual([
      expect.stringMatching(/^set\.jsonl:1: patchbay\.verify: must be a non-empty command \(got 42\)$/),
      expect.stringMatching(/^set\.jsonl:2: patchbay\.verify: must be a non-empty command/),
      expect.stringMatching(/^set\.jsonl:3: patchbay\.verify: must be at most .* characters/),
      'set.jsonl:4: patchbay.verfy: unknown field (did you mean "verify"?)',
    ]);
  });

  it("refuses an instance with no FAIL_TO_PASS test: every patch would resolve it", () => {
    expect(problems(jsonl(instance({ FAIL_TO_PASS: [] })))).toEqual([
      expect.stringMatching(/^set\.jsonl:1: FAIL_TO_PASS: must name at least one test/),
    ]);
  });

  it("refuses an empty set", () => {
    expect(problems("\n\n")).toEqual(["set.jsonl:1: no instances: a task set names at least one"]);
  });
});

describe("parseTaskSet: bounds on hostile input", () => {
  it("refuses a text over 64 MiB before parsing it", () => {
    const big = " ".repeat(MAX_SET_BYTES + 1);
    expect(problems(big)).toEqual([expect.stringMatching(/^set\.jsonl:1: the file is \d+ bytes, over the bound/)]);
  });

  it("refuses more than 10,000 instances, as JSONL or as an array", () => {
    const many = Array.from({ length: MAX_INSTANCES + 1 }, () => "{}");
    expect(problems(many.join("\n"))).toEqual(["set.jsonl:1: 10001 records, over the bound of 10000: split the file"]);
    expect(problems(`[${many.join(",")}]`)).toEqual([
      "set.jsonl:1: 10001 records, over the bound of 10000: split the file",
    ]);
  });

  it("refuses a patch over 8 MiB, a list over 20,000 tests and a test name over 2,000 characters", () => {
    const p = problems(
      jsonl(
        instance({
          test_patch: "x".repeat(MAX_PATCH_BYTES + 1),
          FAIL_TO_PASS: Array.from({ length: MAX_TESTS_PER_LIST + 1 }, (_, i) => `t${i}`),
          PASS_TO_PASS: ["ok", "y".repeat(2_001), 5, ""],
        }),
      ),
    );
    expect(p).toEqual([
      `set.jsonl:1: test_patch: must be at most ${MAX_PATCH_BYTES} bytes (8 MiB) (got ${MAX_PATCH_BYTES + 1})`,
      "set.jsonl:1: FAIL_TO_PASS: must name at most 20000 tests (got 20001)",
      "set.jsonl:1: PASS_TO_PASS[1]: must be a test name of at most 2000 characters, not empty (got 2001 characters), and 2 more like it",
    ]);
  });

  it("lists at most 1,000 problems in its message, and keeps every one", () => {
    const text = Array.from({ length: 1_500 }, () => "{bad").join("\n");
    try {
      parseTaskSet(text, "s");
      throw new Error("no problem found");
    } catch (err) {
      const e = err as EvalSetError;
      expect(e.problems).toHaveLength(1_500);
      expect(e.message.split("\n")).toHaveLength(1 + 1_000 + 1);
      expect(e.message).toMatch(/^1500 problems, nothing was read:\ns:1: not valid JSON: [^\n]*\n/);
      expect(e.message).toMatch(/\n… and 500 more$/);
      expect(e.kind).toBe("spec");
    }
  });
});

describe("parsePredictions: SWE-bench's predictions", () => {
  const pred = (id: string, patch: string | null = "diff --git a/x b/x\n") => ({
    instance_id: id,
    model_patch: patch,
    model_name_or_path: "claude-x",
  });

  it("reads JSONL, a JSON array and a JSON object keyed by instance_id alike", () => {
    const want = [pred("a"), pred("b", null)];
    expect(parsePredictions(jsonl(...want))).toEqual(want);
    expect(parsePredictions(JSON.stringify(want))).toEqual(want);
    expect(
      parsePredictions(JSON.stringify({ a: want[0], b: { model_patch: null, model_name_or_path: "claude-x" } })),
    ).toEqual(want);
    expect(parsePredictions(JSON.stringify(pred("a")))).toEqual([pred("a")]);
  });

  it("names a key that disagrees with its instance_id, a bad patch, a duplicate", () => {
    const p = problems(
      JSON.stringify({ a: pred("b"), c: { ...pred("c"), model_patch: 5 } }, null, 1),
      parsePredictions,
    );
    expect(p).toEqual([
      'set.jsonl:2: instance_id: must be its key, "a" (got "b")',
      "set.jsonl:7: model_patch: must be a patch (a unified diff) or null (got 5)",
    ]);
    expect(problems(jsonl(pred("a"), pred("a")), parsePredictions)).toEqual([
      'set.jsonl:2: instance_id: duplicate (got "a", first at line 1)',
    ]);
  });
});

describe("resolveRepo", () => {
  it("keeps a git URL or scp-like address, and makes a path absolute against the set's directory", () => {
    expect(resolveRepo("https://github.com/acme/calc.git", "/sets")).toBe("https://github.com/acme/calc.git");
    expect(resolveRepo("file:///srv/calc", "/sets")).toBe("file:///srv/calc");
    expect(resolveRepo("git@github.com:acme/calc.git", "/sets")).toBe("git@github.com:acme/calc.git");
    expect(resolveRepo("./repos/calc", "/sets/py")).toBe("/sets/py/repos/calc");
    expect(resolveRepo("../calc", "/sets/py")).toBe("/sets/calc");
    expect(resolveRepo("/srv/calc", "/sets")).toBe("/srv/calc");
  });
});
