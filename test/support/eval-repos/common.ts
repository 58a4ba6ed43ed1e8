// What the eval's fixture repositories (test/support/eval-repos/) share: their test commands and
// formats, their .gitignore files and a package.json.

/** Python's: stdlib unittest, verbose, read as unittest. */
export const UNITTEST = { command: "python3 -m unittest -v", format: "unittest" } as const;
/** JavaScript's, read as TAP: node's own test runner. */
export const TAP = { command: "node --test --test-reporter=tap", format: "tap" } as const;
/** JavaScript's, read as JUnit XML from the file the runner writes. */
export const JUNIT = {
  command: "node --test --test-reporter=junit --test-reporter-destination=junit.xml",
  format: "junit",
  file: "junit.xml",
} as const;

/** A Python repository's .gitignore. */
export const PY_GITIGNORE = "__pycache__/\n";
/** A JavaScript repository's .gitignore. */
export const JS_GITIGNORE = "node_modules/\njunit.xml\n";

/** A package.json (an ES module package), with `dependencies` when given. */
export const pkg = (name: string, deps?: Record<string, string>) =>
  JSON.stringify(
    { name, version: "1.0.0", private: true, type: "module", ...(deps ? { dependencies: deps } : {}) },
    null,
    2,
  ) + "\n";
