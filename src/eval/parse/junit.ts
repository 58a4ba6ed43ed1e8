// JUnit XML, as pytest's --junitxml, Maven's surefire and `node --test --test-reporter=junit` write
// it: <testsuites> and <testsuite> (nested or not) holding <testcase> elements, each with a
// <failure>, <error> or <skipped> child or none. The XML is hostile: no entity of a DOCTYPE is ever
// expanded (only XML's five named ones and numeric references are decoded, by hand), nesting is
// bounded, and a document that cannot be read gives no tests (so every test counts as missing). Pure.
//
// How a test is named: `classname::name` from its <testcase> attributes (pytest:
// `tests.test_x.TestClass::test_a`), or `name` alone when classname is empty or absent. Node 20's
// reporter writes classname="test" on every test and keeps describe blocks as <testsuite> elements,
// which this naming does not include: `test::divides` (use the tap format to have node's nesting).
// Statuses: <error> ERROR, <failure> FAILED, <skipped> SKIPPED (node's <skipped type="todo"> beside
// a <failure> is a failing TODO: XFAIL), none PASSED.
import { XMLParser } from "fast-xml-parser";
import type { TestStatus } from "../types.js";
import { Statuses } from "./statuses.js";

/** The deepest element nesting read: deeper, the document is refused. */
const MAX_XML_DEPTH = 200;

const NAMED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
/** XML's predefined entities and character references decoded, anything else left as written. */
function decode(s: string): string {
  return s.replace(/&(?:#x([0-9a-fA-F]{1,6})|#(\d{1,7})|(lt|gt|amp|quot|apos));/g, (whole, hex, dec, named) => {
    if (named) return NAMED[named as string]!;
    const cp = parseInt((hex ?? dec) as string, hex ? 16 : 10);
    return cp <= 0x10ffff ? String.fromCodePoint(cp) : whole;
  });
}

/** The XML document in `text`: from its first JUnit element (or declaration) to its last closing tag, so a command's other output around it does not spoil it. */
function xmlPart(text: string): string {
  const starts = ["<?xml", "<testsuites", "<testsuite"].map((t) => text.indexOf(t)).filter((i) => i >= 0);
  const start = starts.length > 0 ? Math.min(...starts) : 0;
  const end = Math.max(text.lastIndexOf("</testsuites>") + 13, text.lastIndexOf("</testsuite>") + 12);
  return text.slice(start, end > start + 12 ? end : text.length);
}

type Node = Record<string, unknown>;
const list = (v: unknown): Node[] => (Array.isArray(v) ? (v as Node[]) : v && typeof v === "object" ? [v as Node] : []);

function statusOf(tc: Node): TestStatus {
  const failed = list(tc.failure).length > 0;
  if (list(tc.error).length > 0) return "ERROR";
  const skipped = list(tc.skipped);
  if (failed && skipped.some((s) => s.type === "todo")) return "XFAIL";
  if (failed) return "FAILED";
  return skipped.length > 0 ? "SKIPPED" : "PASSED";
}

/** Each <testcase> in a JUnit XML document, with its status. */
export function parseJunit(text: string): Record<string, TestStatus> {
  const parser = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: "",
    processEntities: false,
    htmlEntities: false,
    ignoreDeclaration: true,
    ignorePiTags: true,
    parseTagValue: false,
    parseAttributeValue: false,
    allowBooleanAttributes: true,
    maxNestedTags: MAX_XML_DEPTH,
    isArray: (name) => ["testsuite", "testcase", "failure", "error", "skipped"].includes(name),
  });
  let doc: unknown;
  try {
    doc = parser.parse(xmlPart(text));
  } catch {
    return {}; // not XML that can be read: no test ran, as far as anyone can tell
  }
  const out = new Statuses();
  const visit = (node: Node, depth: number): void => {
    if (depth > MAX_XML_DEPTH) return;
    for (const tc of list(node.testcase)) {
      const name = typeof tc.name === "string" ? decode(tc.name) : "";
      const cls = typeof tc.classname === "string" ? decode(tc.classname) : "";
      if (name) out.add(cls ? `${cls}::${name}` : name, statusOf(tc));
    }
    for (const suite of list(node.testsuite)) visit(suite, depth + 1);
    for (const suites of list(node.testsuites)) visit(suites, depth + 1);
  };
  if (doc && typeof doc === "object") visit(doc as Node, 0);
  return out.toRecord();
}
