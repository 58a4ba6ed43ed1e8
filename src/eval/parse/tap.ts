// TAP, versions 13 and 14, as `node --test --test-reporter=tap` prints it: `ok N - name`,
// `not ok N - name`, subtests indented four spaces under their parent (after a `# Subtest: name`
// comment), `# SKIP` and `# TODO` directives, YAML blocks between `---` and `...`. SWE-bench's TAP
// parser (swebench/harness/log_parsers/javascript.py, parse_log_tap) reads only unindented lines;
// this one reads the nesting too. Pure.
//
// How a test is named: its description (after `ok N - `, before an unescaped `#`, with `\#` and `\\`
// unescaped), prefixed by its parents' names joined with " > ": `math > nested > divides`. A parent
// (node's `describe`, or a test with subtests) is a test too, under its own name. Statuses: `ok`
// PASSED, `not ok` FAILED; `# SKIP` SKIPPED; `not ok … # TODO` XFAIL (a known failure, as pytest's
// xfail), `ok … # TODO` PASSED. A line without a description is named by its number.
import type { TestStatus } from "../types.js";
import { plainLines, Statuses } from "./statuses.js";

const RESULT = /^( *)(not ok|ok)\b(?: +(\d+))?(?: +-)?(?: (.*))?$/;
const SUBTEST = /^( *)# Subtest: (.*)$/;
// Deeper nesting than this is read as this deep: what a hostile stream of spaces can cost stays bounded.
const MAX_DEPTH = 64;
const depthOf = (spaces: string) => Math.min(MAX_DEPTH, Math.floor(spaces.length / 4));

/** A description split at its first unescaped `#`: the name (unescaped) and the directive. */
function describe(text: string): { name: string; directive: string } {
  let i = 0;
  for (; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === "#") break;
  }
  const name = text
    .slice(0, i)
    .trim()
    .replace(/\\([\\#])/g, "$1");
  return { name, directive: text.slice(i + 1).trim() };
}

function statusOf(ok: boolean, directive: string): TestStatus {
  if (/^skip/i.test(directive)) return "SKIPPED";
  if (/^todo/i.test(directive)) return ok ? "PASSED" : "XFAIL";
  return ok ? "PASSED" : "FAILED";
}

type Found = { path: string[]; status: TestStatus };

/** Each test a TAP stream names, with its status (nested names joined with " > "). */
export function parseTap(text: string): Record<string, TestStatus> {
  // A subtest's results come before its parent's line, which names the parent: they wait, per
  // depth, for it. `# Subtest:` comments name the parents of results whose parent never reports.
  const pending: Found[][] = [];
  const announced: string[] = [];
  let yamlIndent: number | undefined;
  for (const line of plainLines(text)) {
    const indent = line.length - line.trimStart().length;
    if (yamlIndent !== undefined) {
      if (indent === yamlIndent && line.trim() === "...") yamlIndent = undefined;
      continue;
    }
    const sub = SUBTEST.exec(line);
    if (sub) {
      const depth = depthOf(sub[1]!);
      announced.length = depth;
      announced[depth] = describe(sub[2]!).name;
      continue;
    }
    const m = RESULT.exec(line);
    if (!m) {
      if (line.trim() === "---" && indent > 0) yamlIndent = indent;
      continue;
    }
    const depth = depthOf(m[1]!);
    const { name, directive } = describe(m[4] ?? "");
    const own = name || m[3] || "";
    const children = pending.splice(depth + 1).flat();
    (pending[depth] ??= []).push(
      { path: [own], status: statusOf(m[2] === "ok", directive) },
      ...children.map((c) => ({ ...c, path: [own, ...c.path] })),
    );
  }
  // Results whose parent never reported (the output stopped): named under the announced parents.
  for (let d = pending.length - 1; d > 0; d--) {
    const orphans = pending.splice(d).flat();
    const parent = announced[d - 1];
    (pending[d - 1] ??= []).push(...orphans.map((c) => ({ ...c, path: parent ? [parent, ...c.path] : c.path })));
  }
  const out = new Statuses();
  for (const f of pending[0] ?? []) out.add(f.path.join(" > "), f.status);
  return out.toRecord();
}
