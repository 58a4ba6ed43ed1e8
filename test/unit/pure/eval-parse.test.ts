// The test-output parsers (src/eval/parse/): real output captured on this machine from
// `python3 -m unittest -v`, pytest -rA and -v, and `node --test` with its tap and junit reporters
// (test/fixtures/eval/, with the test files that printed it), each test named as the parser's doc
// comment says; and hostile output (fake result lines, huge or deeply nested text, XML entity bombs)
// bounded. Pure: the fixtures are read, nothing is run.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_OUTPUT_CHARS, MAX_TESTS, boundOutput, parseTestOutput } from "../../../src/eval/parse/index.js";

const fixture = (name: string) => readFileSync(resolve(import.meta.dirname, "../../fixtures/eval", name), "utf8");

describe("unittest: `python3 -m unittest -v` on Python 3.11", () => {
  it("names each test by the text before ' ... ', its status at the line's end", () => {
    const m = "pkg.test_mod.MathTest";
    expect(parseTestOutput("unittest", fixture("unittest-verbose.txt"))).toEqual({
      [`test_adds (${m}.test_adds)`]: "PASSED",
      // Its docstring's first line is printed on the next line, before " ... ": still named by its own line.
      [`test_documented (${m}.test_documented)`]: "PASSED",
      [`test_errors (${m}.test_errors)`]: "ERROR",
      [`test_expected (${m}.test_expected)`]: "XFAIL",
      [`test_fails (${m}.test_fails)`]: "FAILED",
      // Output on lines of its own between " ... " and "ok", and output on the same line before "ok".
      [`test_noisy (${m}.test_noisy)`]: "PASSED",
      [`test_noisy_inline (${m}.test_noisy_inline)`]: "PASSED",
      [`test_skipped (${m}.test_skipped)`]: "SKIPPED",
      [`test_subtests (${m}.test_subtests) (i=1)`]: "FAILED",
      [`test_subtests (${m}.test_subtests)`]: "FAILED",
      [`test_unexpected_success (${m}.test_unexpected_success)`]: "FAILED",
      "test_adds (pkg.test_mod.OtherTest.test_adds)": "PASSED",
    });
  });

  it("reads the older naming and a status after output of several lines", () => {
    const out = ["test_a (m.C) ... starting", "more output", "ok", "test_b (m.C) ... noise FAIL", ""].join("\n");
    expect(parseTestOutput("unittest", out)).toEqual({ "test_a (m.C)": "PASSED", "test_b (m.C)": "FAILED" });
    // Output that looks like a test's own line, printed while its status is awaited, is only output.
    const looks = ["test_c (m.C) ... ", "loading (cache)", "ok"].join("\n");
    expect(parseTestOutput("unittest", looks)).toEqual({ "test_c (m.C)": "PASSED" });
  });

  it("lets the failure report fail a test whose line was faked as ok", () => {
    const out = ["test_a (m.C) ... ok", "", "=".repeat(70), "FAIL: test_a (m.C)", "-".repeat(70)].join("\n");
    expect(parseTestOutput("unittest", out)).toEqual({ "test_a (m.C)": "FAILED" });
  });
});

describe("pytest", () => {
  const x = "tests/test_x.py";
  it("reads the -rA summary: node ids, messages after ' - ' dropped, the SKIPPED [N] lines ignored", () => {
    expect(parseTestOutput("pytest", fixture("pytest-rA.txt"))).toEqual({
      [`${x}::test_adds`]: "PASSED",
      [`${x}::test_eq[1-1]`]: "PASSED",
      [`${x}::test_eq[x y-x y]`]: "PASSED",
      [`${x}::TestThing::test_method`]: "PASSED",
      [`${x}::test_xfail`]: "XFAIL",
      [`${x}::test_xpass`]: "FAILED",
      [`${x}::test_error`]: "ERROR",
      [`${x}::test_fails`]: "FAILED",
      [`${x}::test_eq[2-3]`]: "FAILED",
    });
  });

  it("reads the -v lines, with their reasons and progress", () => {
    expect(parseTestOutput("pytest", fixture("pytest-v.txt"))).toEqual({
      [`${x}::test_adds`]: "PASSED",
      [`${x}::test_fails`]: "FAILED",
      [`${x}::test_skipped`]: "SKIPPED",
      [`${x}::test_xfail`]: "XFAIL",
      [`${x}::test_xpass`]: "FAILED",
      [`${x}::test_eq[1-1]`]: "PASSED",
      [`${x}::test_eq[2-3]`]: "FAILED",
      [`${x}::test_eq[x y-x y]`]: "PASSED",
      [`${x}::test_error`]: "ERROR",
      [`${x}::TestThing::test_method`]: "PASSED",
    });
  });

  it("strips colours and xdist's prefix, and a faked PASSED line cannot pass a failed test", () => {
    const out = [
      "\x1b[32mPASSED\x1b[0m t.py::test_a",
      "[gw1] [ 50%] PASSED t.py::test_b",
      "PASSED t.py::test_c",
      "FAILED t.py::test_c - assert 1 == 2",
      "collected 3 items ... all PASSED",
    ].join("\n");
    expect(parseTestOutput("pytest", out)).toEqual({
      "t.py::test_a": "PASSED",
      "t.py::test_b": "PASSED",
      "t.py::test_c": "FAILED",
    });
  });
});

describe("tap: `node --test --test-reporter=tap` on Node 20", () => {
  it("names nested tests 'parent > child', directives and escapes read", () => {
    expect(parseTestOutput("tap", fixture("node-tap.txt"))).toEqual({
      adds: "PASSED",
      fails: "FAILED",
      "skipped one": "SKIPPED",
      "todo one": "XFAIL",
      math: "FAILED",
      "math > multiplies": "PASSED",
      "math > nested": "FAILED",
      "math > nested > divides": "PASSED",
      "math > nested > breaks": "FAILED",
      parent: "PASSED",
      "parent > child ok": "PASSED",
      "parent > child # hash": "PASSED",
    });
  });

  it("reads TAP 14 nesting without # Subtest comments, and results whose parent never reported", () => {
    const plain = ["TAP version 14", "    ok 1 - inner", "ok 1 - outer", "ok 2 # SKIP no name", "1..2"].join("\n");
    expect(parseTestOutput("tap", plain)).toEqual({ outer: "PASSED", "outer > inner": "PASSED", "2": "SKIPPED" });
    const cut = [
      "# Subtest: suite",
      "    # Subtest: a",
      "    not ok 1 - a",
      "      ---",
      "      ok 9 - fake",
      "      ...",
    ];
    expect(parseTestOutput("tap", cut.join("\n"))).toEqual({ "suite > a": "FAILED" });
  });
});

describe("junit", () => {
  it("reads node 20's junit reporter: classname 'test', each testcase's status", () => {
    expect(parseTestOutput("junit", fixture("node-junit.xml"))).toEqual({
      "test::adds": "PASSED",
      "test::fails": "FAILED",
      "test::skipped one": "SKIPPED",
      "test::todo one": "XFAIL",
      "test::multiplies": "PASSED",
      "test::divides": "PASSED",
      "test::breaks": "FAILED",
      "test::child ok": "PASSED",
      "test::child # hash": "PASSED",
    });
  });

  it("names a testcase `classname::name`, or `name` with an empty classname; XML's entities decoded", () => {
    const xml = `noise before\n<?xml version="1.0"?>
<testsuites><testsuite name="pytest">
  <testcase classname="tests.test_x.TestThing" name="test_a"/>
  <testcase classname="" name="a &lt;b&gt; &amp; &#x263A;"><error message="x"/></testcase>
  <testcase name="c"><skipped/></testcase>
</testsuite></testsuites>\nnoise after`;
    expect(parseTestOutput("junit", xml)).toEqual({
      "tests.test_x.TestThing::test_a": "PASSED",
      "a <b> & \u263a": "ERROR",
      c: "SKIPPED",
    });
  });

  it("never expands a DOCTYPE's entities: billion laughs stays text, an external entity reads as no tests", () => {
    const doc = (extra: string[], name: string) =>
      [
        '<?xml version="1.0"?>',
        "<!DOCTYPE lolz [",
        '<!ENTITY lol "lol">',
        ...Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i || ""};`.repeat(10)}">`),
        ...extra,
        "]>",
        `<testsuites><testcase name="${name}"/><testcase name="ok"/></testsuites>`,
      ].join("\n");
    expect(parseTestOutput("junit", doc([], "&lol9;"))).toEqual({ "&lol9;": "PASSED", ok: "PASSED" });
    expect(parseTestOutput("junit", doc(['<!ENTITY xxe SYSTEM "file:///etc/passwd">'], "&xxe;"))).toEqual({});
  });

  it("refuses nesting deeper than its bound, and broken XML, as no tests at all", () => {
    const deep = `${"<testsuite>".repeat(10_000)}<testcase name="x"/>${"</testsuite>".repeat(10_000)}`;
    expect(parseTestOutput("junit", deep)).toEqual({});
    expect(parseTestOutput("junit", "<testsuites><testcase name=")).toEqual({});
  });
});

describe("bounds on every format", () => {
  it("keeps the head of output over 16 MiB, cut at a line, with a note", () => {
    const line = "PASSED t.py::test_a\n";
    const text = line.repeat(Math.ceil((MAX_OUTPUT_CHARS + 10) / line.length)) + "FAILED t.py::test_z\n";
    const b = boundOutput(text);
    expect(b.cut).toBeGreaterThan(0);
    expect(b.text.length).toBeLessThan(MAX_OUTPUT_CHARS + 200);
    expect(b.text).toMatch(/\n\[patchbay: [\d]+ characters of test output cut; the tests in it count as missing\]\n$/);
    expect(parseTestOutput("pytest", text)).toEqual({ "t.py::test_a": "PASSED" });
  });

  it("reads at most 100,000 tests and no name over 2,000 characters", () => {
    const many = Array.from({ length: MAX_TESTS + 5 }, (_, i) => `ok ${i + 1} - t${i}`).join("\n");
    const out = parseTestOutput("tap", `${many}\nok 1 - ${"n".repeat(2_001)}`);
    expect(Object.keys(out)).toHaveLength(MAX_TESTS);
    expect(out[`t${MAX_TESTS}`]).toBeUndefined();
  });

  it("keeps a test named __proto__ as its own property, polluting nothing", () => {
    const out = parseTestOutput("tap", "not ok 1 - __proto__\nok 2 - constructor");
    expect(Object.hasOwn(out, "__proto__")).toBe(true);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(out["constructor"]).toBe("PASSED");
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
