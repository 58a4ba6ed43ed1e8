// The network of `patchbay image build --from`: none unless the caller names one. Pure logic.
// With networkmode "none" the build's RUN containers have only `lo`, but an `ADD <url>` is
// fetched by the engine itself, from its host's network (its loopback included: the dashboard, the
// metrics port, Redis's neighbours), whatever the build's network. So without a network, every
// ADD whose source could be a URL is refused before the build starts.

/** A name for the engine's build `networkmode`: a network's name (host, none, a user-defined one). */
export const NETWORK_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export function networkProblem(name: string): string | undefined {
  return NETWORK_NAME.test(name)
    ? undefined
    : `takes a Docker network's name (none, host, or a network of the engine's), not '${name}'`;
}

/**
 * The ADD instructions of a Dockerfile (ONBUILD ADD too: a later stage FROM this one runs it)
 * whose sources may be remote, with their line numbers. Conservative by design: a source with a
 * `$` (a variable could expand to a URL) or anything that reads as `scheme://` or `git@` once
 * quotes, escapes and line breaks are taken out counts as remote.
 */
export function remoteAdds(dockerfile: string): { line: number; text: string }[] {
  const lines = dockerfile.split(/\r?\n/);
  const found: { line: number; text: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let text = lines[i]!;
    // Either escape character continues a line (`# escape=` may choose either); comment and
    // empty lines inside a continuation are skipped, as the engine's parser does.
    while (/[\\`]\s*$/.test(text) && i + 1 < lines.length) {
      text = text.replace(/[\\`]\s*$/, "");
      do i++;
      while (i + 1 < lines.length && /^\s*(#.*)?$/.test(lines[i]!));
      text += lines[i]!;
    }
    if (isRemoteAdd(text)) found.push({ line: start + 1, text: text.trim().slice(0, 200) });
  }
  return found;
}

/** One instruction (a Dockerfile's logical line, or an image's ONBUILD trigger): an ADD that may fetch. */
export function isRemoteAdd(instruction: string): boolean {
  const m = /^\s*(?:ONBUILD\s+)?ADD(?:\s+|$)([\s\S]*)$/i.exec(instruction);
  if (!m) return false;
  const args = m[1]!.replace(/[\s\\`"']/g, "");
  return args.includes("$") || /[a-z][a-z0-9+.-]*:\/\//i.test(args) || /git@/i.test(args);
}
