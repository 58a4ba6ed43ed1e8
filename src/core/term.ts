// Text from a job (tool output, model text, commands, file names, error messages) made safe to print on a
// terminal. A hostile repo or model could otherwise write the clipboard (OSC 52), set the window title,
// move the cursor or clear the screen to hide or fake lines, or reorder text with bidi overrides.

// Whole escape sequences (ECMA-48), in one left-to-right pass so a sequence is never cut in two:
// - strings: OSC (ESC ] / 0x9D), DCS (ESC P / 0x90), SOS (ESC X / 0x98), PM (ESC ^ / 0x9E), APC (ESC _ / 0x9F),
//   up to BEL, ST (ESC \) or 8-bit ST (0x9C). An unterminated one loses only its introducer (below): its
//   content is then plain text, and whatever follows stays visible. A string's body holds no other
//   string's 8-bit introducer (where one comes, the first is unterminated): else a run of them made
//   every one a start scanned to the run's end, quadratic in the agent's text;
// - CSI (ESC [ / 0x9B): parameter bytes, intermediate bytes, a final byte;
// - any other ESC sequence: intermediate bytes, then a final byte (ESC c, ESC 7, ESC ( 0, and ESC ] itself).
const ESCAPE_SEQUENCE =
  /(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\x90\x98\x9d\x9e\x9f]*(?:\x07|\x1b\\|\x9c)|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]|\x1b[\x20-\x2f]*[\x30-\x7e]/g;
// What is left of C0 but tab and newline (which one-line output has already made spaces), DEL and C1,
// a lone ESC or 0x9B included.
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
const LINE_BREAK = /\r\n|[\r\u2028\u2029]/g;
const ONE_LINE_SPACE = /\r\n|[\t\n\v\f\r\u2028\u2029]/g;
// Bidi embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI FSI PDI) can make a line read
// differently from what it is: shown as a visible U+FFFD instead.
const BIDI = /[\u202a-\u202e\u2066-\u2069]/g;
const BIDI_PLACEHOLDER = "\uFFFD";

export interface SafeTextOptions {
  /** One-line output: every line break and tab becomes a space. Otherwise `\n` and `\t` are kept (CR and CRLF become `\n`). */
  oneLine?: boolean;
}

/**
 * `s` without anything a terminal would act on: escape sequences are removed whole, other C0 and C1
 * controls and DEL are removed, bidi controls become U+FFFD. Pure; for human output only (JSON output
 * stays exact).
 */
export function safeText(s: string, opts: SafeTextOptions = {}): string {
  let out = s.replace(ESCAPE_SEQUENCE, "");
  out = opts.oneLine ? out.replace(ONE_LINE_SPACE, " ") : out.replace(LINE_BREAK, "\n");
  return out.replace(CONTROL, "").replace(BIDI, BIDI_PLACEHOLDER);
}
