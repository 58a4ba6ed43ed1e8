// Guards that `patchbay --help`, every group's and every command's --help is a table whose columns
// never touch: each option row (and each command of the list) has its description at the one column
// of its help, two spaces at least after the term (or on the next line when the term is longer), and
// no line is wider than 100 characters unless it is one word.
import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, patchbay } from "../support/cli-helpers.js";

beforeAll(ensureBuilt);

/** What is wrong with the columns of one --help text, one message per line at fault. */
function columnFaults(help: string, rowStart: RegExp): string[] {
  const lines = help.split("\n");
  const faults: string[] = [];
  // The description column: where the first row's description starts (after its first run of 2+ spaces).
  let col: number | undefined;
  lines.forEach((line, i) => {
    if (line.length > 100 && /\s/.test(line.trim())) faults.push(`line ${i + 1} is ${line.length} characters: ${line}`);
    if (!rowStart.test(line)) return;
    const m = /^ {2}\S+(?: \S+)*? {2,}(?=\S)/.exec(line);
    if (!m) {
      // A term alone: its description is on the next line, at the column.
      const next = lines[i + 1] ?? "";
      if (col !== undefined && !next.startsWith(" ".repeat(col)))
        faults.push(`line ${i + 1} has no description two spaces after its term: ${line}`);
      return;
    }
    col ??= m[0].length;
    if (m[0].length !== col || line.slice(col - 2, col) !== "  ")
      faults.push(`line ${i + 1}: its description is not at column ${col} two spaces after the term: ${line}`);
  });
  return faults;
}

describe("--help columns", () => {
  it("the commands list has its summaries at one column, two spaces at least after the longest name", async () => {
    const main = await patchbay(["--help"]);
    expect(main.code).toBe(0);
    const list = main.stdout.split("Commands:\n")[1]!.split("\n\n")[0]!;
    expect(columnFaults(list, /^ {2}[a-z]/)).toEqual([]);
  });

  it("every command's --help (and every group's) has its options as a table whose columns never touch", async () => {
    const main = await patchbay(["--help"]);
    const names = main.stdout
      .split("Commands:\n")[1]!
      .split("\n\n")[0]!
      .split("\n")
      .map((l) => /^ {2}([a-z]+(?: [a-z]+)?) {2,}/.exec(l)?.[1])
      .filter((n): n is string => n !== undefined);
    expect(names).toContain("campaign tracker");
    const groups = [...new Set(names.filter((n) => n.includes(" ")).map((n) => n.split(" ")[0]!))];
    const faults: string[] = [];
    for (const name of names) {
      const r = await patchbay([...name.split(" "), "--help"]);
      expect(r.code, `${name}: ${r.stderr}`).toBe(0);
      faults.push(...columnFaults(r.stdout, /^ {2}-/).map((f) => `patchbay ${name} --help: ${f}`));
    }
    for (const group of groups) {
      const r = await patchbay([group, "--help"]);
      faults.push(...columnFaults(r.stdout, /^ {2}[a-z]/).map((f) => `patchbay ${group} --help: ${f}`));
    }
    expect(faults).toEqual([]);
  }, 120_000);
});
