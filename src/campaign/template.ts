// `{{name}}` templates of campaign files: the task per repository, the branch, the pull request's
// title and body, the commit message. Pure. A name the template may not use is an error when the
// campaign file is read (not when the 300th repository is published); a value is put in as it is.
const PLACE = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** The names a template uses, in order of first use. */
export function templateNames(template: string): string[] {
  return [...new Set([...template.matchAll(PLACE)].map((m) => m[1]!))];
}

/** The first name not in `known`, with what is known, as an error text; undefined when all are. */
export function unknownName(template: string, known: readonly string[]): string | undefined {
  const bad = templateNames(template).find((n) => !known.includes(n));
  return bad === undefined ? undefined : `unknown variable {{${bad}}} (known: ${known.join(", ")})`;
}

export function render(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(PLACE, (whole, name: string) => (Object.hasOwn(values, name) ? values[name]! : whole));
}
