// The one rule for a root process in a sandbox (src/sandbox/py/trusted.py: a fixed environment, a
// program checked to be root's alone) put into the python programs that start root processes: the
// helper and the file agent. Inserted after the program's first line, which names it (its name in
// ps, see helper.py's inline children).
import { asset } from "../core/assets.js";

/** `script` with trusted.py after its first line. */
export function withTrustedRule(script: string): string {
  const nl = script.indexOf("\n") + 1;
  return script.slice(0, nl) + asset("sandbox/py/trusted.py") + script.slice(nl);
}
