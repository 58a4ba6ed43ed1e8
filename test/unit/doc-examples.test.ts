// What test/e2e/doc-examples.test.ts runs is what the docs hold: test/support/doc-examples.ts
// finds every fenced block of README.md and docs/*.md with its line and the annotation before it,
// classifies it (a command, a file, output, not-run, another test's), and reads the `patchbay`
// commands a block uses. And no block of the docs is left unclassified: a new example that is
// neither a command nor a known file, and not marked, fails here naming its file and line.
// Files only: no Docker, Redis or network.
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/cli-helpers.js";
import {
  allBlocks,
  classify,
  docFiles,
  extractBlocks,
  patchbayCalls,
  promptLines,
  scriptOf,
} from "../support/doc-examples.js";

const md = [
  "# Title", //                                   1
  "", //                                          2
  "```sh", //                                     3
  "patchbay list --json   # recent jobs", //      4
  "```", //                                       5
  "<!-- example: output: what it prints -->", //  6
  "```", //                                       7
  "12 jobs", //                                   8
  "```", //                                       9
  "- a list item:", //                            10
  "  ```yaml", //                                 11
  "  name: x", //                                 12
  "  repos: [a]", //                              13
  "  ```", //                                     14
  "````md", //                                    15
  "```", //                                       16
  "````", //                                      17
].join("\n");

describe("extractBlocks", () => {
  const blocks = extractBlocks(md, "doc.md");

  it("finds each fenced block with its opening line, language and text, a longer fence holding a shorter", () => {
    expect(blocks.map((b) => [b.line, b.lang, b.text])).toEqual([
      [3, "sh", "patchbay list --json   # recent jobs\n"],
      [7, "", "12 jobs\n"],
      [11, "yaml", "name: x\nrepos: [a]\n"],
      [15, "md", "```\n"],
    ]);
  });

  it("takes the annotation on the line just before a fence, and only there", () => {
    expect(blocks.map((b) => b.annotation)).toEqual([undefined, "output: what it prints", undefined, undefined]);
  });

  it("refuses a block that is never closed, naming its line", () => {
    expect(() => extractBlocks("a\n```sh\nls\n", "x.md")).toThrow("x.md:2: a code block that is never closed");
  });
});

describe("classify", () => {
  const block = (lang: string, text: string, annotation?: string) => ({
    file: "d.md",
    line: 9,
    lang,
    text,
    ...(annotation !== undefined ? { annotation } : {}),
  });

  it("reads the annotations: output (with a reason or none), not-run with its reason, another test", () => {
    expect(classify(block("", "x\n", "output"))).toEqual({ kind: "output" });
    expect(classify(block("sh", "x\n", "output: shown"))).toEqual({ kind: "output", reason: "shown" });
    expect(classify(block("sh", "x\n", "not-run: a cloud"))).toEqual({ kind: "not-run", reason: "a cloud" });
    expect(classify(block("", "x\n", "test/e2e/readme-tour.test.ts"))).toEqual({
      kind: "by-test",
      test: "test/e2e/readme-tour.test.ts",
    });
    expect(classify(block("sh", "x\n", "not-run")).kind).toBe("unknown"); // a reason is required
    expect(classify(block("sh", "x\n", "skip")).kind).toBe("unknown");
  });

  it("tells commands and files by language and content", () => {
    expect(classify(block("sh", "ls\n"))).toEqual({ kind: "command" });
    expect(classify(block("", "$ patchbay list\n3 jobs\n"))).toEqual({ kind: "command" });
    expect(classify(block("yaml", "name: c\nrepos:\n  - git: u\n"))).toEqual({ kind: "file", format: "campaign" });
    expect(classify(block("yaml", "scrape_configs: []\n"))).toEqual({ kind: "file", format: "yaml" });
    expect(classify(block("json", '{ "task": "t" }\n'))).toEqual({ kind: "file", format: "jobspec" });
    expect(classify(block("json", '{ "status": 400 }\n'))).toEqual({ kind: "file", format: "json" });
    expect(classify(block("jsonc", '"setup": "npm ci"\n'))).toEqual({ kind: "file", format: "jobspec-fragment" });
    expect(classify(block("ts", "export {};\n"))).toEqual({ kind: "file", format: "typescript" });
    expect(classify(block("Dockerfile".toLowerCase(), "FROM x\n"))).toEqual({ kind: "file", format: "dockerfile" });
  });

  it("fails an unmarked block it cannot tell, naming its file and line and the marks that would do", () => {
    const k = classify(block("", "src/\n  cli/\n"));
    expect(k.kind).toBe("unknown");
    expect(k.kind === "unknown" && k.why).toMatch(/^d\.md:9: .*<!-- example: output -->/);
  });
});

describe("the commands of a block", () => {
  it("runs a prompt block's commands (with their continuation lines), not their output", () => {
    const text = "$ patchbay run --repo r \\\n    --task t\njob 1 enqueued\n$ ls out\npatch.diff\n";
    expect(promptLines(text)).toEqual(["patchbay run --repo r \\\n    --task t", "ls out"]);
    expect(scriptOf({ file: "a", line: 1, lang: "", text })).toBe("patchbay run --repo r \\\n    --task t\nls out\n");
  });

  it("reads each patchbay call's words, to the end of its command; comments and quotes aside", () => {
    const script = [
      "export OTEL_SERVICE_NAME=patchbay-worker   # default patchbay",
      "patchbay worker --metrics-port 9464   # or 0.0.0.0:9464",
      "GITHUB_TOKEN=… npx patchbay campaign publish c --dry-run",
      "patchbay watch ID --json > t.jsonl && patchbay view t.jsonl -o job.html",
      `patchbay run --task "a b" \\\n  --verify 'c d' | tail -1`,
    ].join("\n");
    expect(patchbayCalls(script)).toEqual([
      ["worker", "--metrics-port", "9464"],
      ["campaign", "publish", "c", "--dry-run"],
      ["watch", "ID", "--json"],
      ["view", "t.jsonl", "-o", "job.html"],
      ["run", "--task", "a b", "--verify", "c d"],
    ]);
  });
});

describe("the docs' own blocks", () => {
  it("reads README.md and docs/*.md, not the dated logs of docs/history/", () => {
    const files = docFiles(ROOT);
    expect(files).toContain("README.md");
    expect(files).toContain("docs/campaigns.md");
    expect(files.filter((f) => f.startsWith("docs/history/"))).toEqual([]);
  });

  it("classifies every block (an unmarked one that is neither a command nor a known file is named here)", () => {
    const blocks = allBlocks(ROOT);
    expect(blocks.length).toBeGreaterThan(30);
    expect(blocks.flatMap((b) => [classify(b)].flatMap((k) => (k.kind === "unknown" ? [k.why] : [])))).toEqual([]);
    // The walkthrough's file is checked as a campaign file, its commands run.
    const walk = blocks.filter((b) => b.file === "docs/campaigns.md").map(classify);
    expect(walk.slice(0, 2)).toEqual([{ kind: "file", format: "campaign" }, { kind: "command" }]);
  });
});
