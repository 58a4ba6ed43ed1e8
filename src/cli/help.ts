// Lays out `patchbay --help` and every command's --help as a table whose columns never touch: the
// term column's width is computed from its terms (a term too long for it gets its description on
// the next line), descriptions and prose are wrapped at HELP_WIDTH, and the commands list is padded
// to its longest name. Commands write their usage by hand (two spaces, a flag, two or more spaces,
// the description; a line indented deeper continues the description above): this aligns them all.

/** The widest line --help prints (a single word longer than this stays whole). */
export const HELP_WIDTH = 100;
/** A term longer than this gets its description on the next line, so one long term never widens the column. */
const MAX_TERM = 28;
/** The least space between the term column and the description column. */
const GAP = 2;

/** Breaks `text` at spaces into lines of at most `width` characters (a longer word stays whole). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/ +/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line];
}

/** Where the description column starts for these terms, indented by `indent`. */
function column(terms: string[], indent: number): number {
  return indent + Math.max(0, ...terms.map((t) => t.length).filter((n) => n <= MAX_TERM)) + GAP;
}

/** One row: the term, then its description from column `col` (on the next line when the term reaches it), wrapped. */
function rowLines(term: string, desc: string, indent: number, col: number, width: number): string[] {
  const head = " ".repeat(indent) + term;
  if (!desc) return [head];
  const body = wrap(desc, Math.max(20, width - col)).map((l) => " ".repeat(col) + l);
  return head.length + GAP <= col ? [head.padEnd(col) + body[0]!.slice(col), ...body.slice(1)] : [head, ...body];
}

/** Rows of a term and its description as a table indented by `indent`: its columns are GAP spaces apart at least. */
export function helpTable(rows: [string, string][], indent = 2, width = HELP_WIDTH): string[] {
  const col = column(
    rows.map(([t]) => t),
    indent,
  );
  return rows.flatMap(([term, desc]) => rowLines(term, desc, indent, col, width));
}

/** An option row of hand-written usage: two spaces, a flag, then its description after two or more spaces. */
const ROW = /^ {2}(-\S.*?)(?: {2,}(\S.*))?$/;

/** Lays `usage` (a command's hand-written help) out again: its option rows as one table, every line wrapped at `width`. */
export function layoutUsage(usage: string, width = HELP_WIDTH): string {
  const rows: { term: string; desc: string }[] = [];
  // Each item is a line of prose or the index of an option row.
  const out: (string | number)[] = [];
  for (const line of usage.split("\n")) {
    const row = ROW.exec(line);
    if (row) {
      out.push(rows.push({ term: row[1]!.trimEnd(), desc: row[2] ?? "" }) - 1);
    } else if (typeof out[out.length - 1] === "number" && /^ {4,}\S/.test(line)) {
      const last = rows[rows.length - 1]!;
      last.desc = `${last.desc} ${line.trim()}`.trim();
    } else {
      const indent = /^ */.exec(line)![0];
      out.push(...(line.length > width ? wrap(line.trim(), width - indent.length).map((l) => indent + l) : [line]));
    }
  }
  const col = column(
    rows.map((r) => r.term),
    2,
  );
  return out
    .flatMap((x) => (typeof x === "number" ? rowLines(rows[x]!.term, rows[x]!.desc, 2, col, width) : [x]))
    .join("\n");
}
