// The model's text (and the task) in a pull request, a merge request and a commit message: shown as
// text, acting on nothing. Forges read markdown and HTML, mentions, closing keywords; GitLab runs
// quick actions (`/approve`, `/merge` at a line's start) with the poster's token; markdown hides
// link reference definitions; git and GitHub read trailers; terminals read escapes (`git log`).
// In a body or a commit message each is broken by a zero-width space where it would act, so a
// reader sees the same words. A title (inertTitle) gets no invisible character: it is one line,
// which no forge reads as markdown blocks, quick actions or trailers (git takes trailers from the
// message's last paragraph, never its subject), so only its mentions and closing keywords, which
// GitLab reads in a title and both forges read in the squash commit made from it, are broken, by
// visible characters. Pure.

/** Zero-width space: invisible, and not whitespace to the forges' patterns. */
const ZW = "\u200b";

// C0 and C1 controls but tab and newline; bidi embeddings, overrides and isolates (text that reads
// other than it is). A NUL also made git refuse the commit message.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** Lines and tabs kept, every other control character dropped. */
export const plainText = (text: string): string => text.replace(/\r\n?/g, "\n").replace(CONTROL, "");

// GitHub's closing keywords and GitLab's default pattern (close, closing, fix, fixing, resolve,
// resolving, implement(s|ed|ing)), an optional colon, whitespace, then a reference (#1,
// group/proj#1, a URL, a path, JIRA-1, "issue #1", the first of a list): the keyword is broken.
const CLOSING =
  /\b(clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?)(?=:?\s+(?:issues?\s+)?(?:[\w./-]*#\d|[A-Z][A-Z0-9_]+-\d|[a-z][a-z0-9+.-]*:\/\/|\.{0,2}\/))/gi;

/** Text the forge shows and does not act on: no mention, no closing keyword, no HTML, no image, no trailer. */
export function inert(text: string): string {
  return (
    plainText(text)
      .replace(/@(?=[A-Za-z0-9])/g, `@${ZW}`)
      .replace(CLOSING, `$1${ZW}`)
      .replace(/<(?=[A-Za-z!/?])/g, `<${ZW}`) // a tag, a comment (hidden from the reviewer), a declaration
      .replace(/!\[/g, `!${ZW}[`) // an image would load from the model's host when the page is opened
      // GitLab's quick actions (/approve, /merge, /ready, /label, /target_branch, ...): a line that
      // starts with a slash and a word is run as a command with the publisher's token (also indented,
      // or in a quote, for any other forge's reading of it).
      .replace(/^([ \t>]*)\/(?=[A-Za-z0-9_])/gm, `$1${ZW}/`)
      // A link reference definition ([x]: url, [^1]: note, [//]: # (x)) renders as nothing: text hidden
      // from the reviewer. Its `]:` is what makes one, wherever the line starts (a list, a quote).
      .replace(/\]:/g, `]${ZW}:`)
      .replace(/^([ \t]*[A-Za-z0-9][A-Za-z0-9-]*)([ \t]*:)(?!\/\/)/gm, `$1${ZW}$2`)
  ); // Co-authored-by:, Signed-off-by:
}

/**
 * Characters that show nothing although Unicode does not call them format characters: the combining
 * grapheme joiner, the Hangul fillers, the Khmer inherent vowels, the variation selectors (also
 * used to hide data in text) and the blank Braille pattern.
 */
const INVISIBLE: readonly (readonly [number, number])[] = [
  [0x034f, 0x034f],
  [0x115f, 0x1160],
  [0x17b4, 0x17b5],
  [0x180b, 0x180f],
  [0x2800, 0x2800],
  [0x3164, 0x3164],
  [0xfe00, 0xfe0f],
  [0xffa0, 0xffa0],
  [0xe0100, 0xe01ef],
];
/** `text` without the characters of INVISIBLE (code points compared: a regex class of combining marks misleads). */
const withoutInvisible = (text: string): string =>
  [...text]
    .filter((ch) => {
      const c = ch.codePointAt(0)!;
      return !INVISIBLE.some(([lo, hi]) => c >= lo && c <= hi);
    })
    .join("");

/** A fullwidth commercial at: reads as "@", and is no mention to either forge's pattern. */
const AT = "\uff20";

/**
 * A title's text: one line, no control and no invisible character (the model's own dropped too); a mention's `@` becomes a
 * fullwidth `＠`, and a closing keyword before a reference is quoted (`"fixes" #1`), which GitHub's
 * and GitLab's patterns (the keyword, an optional colon, spaces, the reference) do not match.
 */
export function inertTitle(text: string): string {
  return (
    withoutInvisible(plainText(text))
      // Format characters (zero-width spaces and joiners, marks, BOM, soft hyphen) the model wrote,
      // (the characters that draw nothing without being format characters went first: INVISIBLE).
      .replace(/\p{Cf}/gu, "")
      .replace(/\s+/g, " ")
      // Both forges take a mention only after a non-word character (an address's `a@b` is none).
      .replace(/(?<![A-Za-z0-9_])@(?=[A-Za-z0-9_])/g, AT)
      .replace(CLOSING, '"$1"')
  );
}
