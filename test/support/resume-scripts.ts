// Scripted jobs for the resume and soak tests: every turn changes the workspace (text, a binary
// file, a deletion, a mode change, an editor edit), so a resume that loses or repeats a turn shows
// in the final patch. Deterministic: the same script gives the same patch in any sandbox.
import { reply, text, toolUse, type Reply } from "./fake-anthropic.js";
import { taskOf } from "./scripts.js";

const bash = (command: string) => reply(toolUse("bash", { command }));

/**
 * `n` turns of changes (every change needs n >= 6), then a final answer; `slowTurn` (1-based)
 * sleeps `sleepSec` mid-command; `paceSec` makes every command take that long at least.
 */
export function editScript(n = 10, opts: { slowTurn?: number; sleepSec?: number; paceSec?: number } = {}): Reply[] {
  const turns: Reply[] = [];
  for (let i = 1; i <= n; i++) {
    const slow = opts.slowTurn === i ? `; sleep ${opts.sleepSec ?? 5}` : opts.paceSec ? `; sleep ${opts.paceSec}` : "";
    if (i === 2) turns.push(bash(`cd /workspace && printf '\\000\\001\\377binary %s\\n' 2 > data.bin${slow}`));
    else if (i === 3)
      turns.push(
        reply(
          toolUse("str_replace_based_edit_tool", {
            command: "str_replace",
            path: "/workspace/clamp.py",
            old_str: "    if v > hi:\n        return lo",
            new_str: "    if v > hi:\n        return hi",
          }),
        ),
      );
    else if (i === 4) turns.push(bash(`cd /workspace && git rm -q README.md && chmod +x test_clamp.py${slow}`));
    else if (i === 7)
      turns.push(reply(toolUse("str_replace_based_edit_tool", { command: "view", path: "/workspace/clamp.py" })));
    else
      turns.push(
        bash(
          `cd /workspace && echo "turn ${i}" >> log.txt && mkdir -p d${i % 3} && echo ${i} > d${i % 3}/f${i}.txt${slow}`,
        ),
      );
  }
  return [...turns, reply(text("Done: the changes are in place."))];
}

/**
 * The edit script for every job, by its turn. A task containing "slow=T" sleeps in turn T the
 * first time that turn is asked for (a resumed attempt that asks again gets it at once), so a test
 * can kill or restart things while the command runs; "turns=N" sets the number of turns, and
 * "pace=S" makes every command sleep S seconds. `count(task)` is the model requests a task paid.
 */
export function resumePolicy(n = 10, sleepSec = 120) {
  const slowDone = new Set<string>();
  const perTask = new Map<string, number>();
  const policy = ({ body }: { body: any }): Reply => {
    const task = taskOf(body);
    perTask.set(task, (perTask.get(task) ?? 0) + 1);
    const turn = (body.messages as { role: string }[]).filter((m) => m.role === "assistant").length + 1;
    const slowTurn = Number(/slow=(\d+)/.exec(task)?.[1] ?? 0);
    const slow = slowTurn === turn && !slowDone.has(task);
    if (slow) slowDone.add(task);
    const paceSec = Number(/pace=(\d+)/.exec(task)?.[1] ?? 0);
    const script = editScript(Number(/turns=(\d+)/.exec(task)?.[1] ?? n), slow ? { slowTurn, sleepSec } : { paceSec });
    return script[turn - 1] ?? { kind: "error", status: 400, message: `script has no turn ${turn}` };
  };
  // The first user message wraps the task text: a task is counted by the conversations that contain it.
  const count = (task: string) => [...perTask].filter(([t]) => t.includes(task)).reduce((s, [, n]) => s + n, 0);
  return { policy, count };
}
