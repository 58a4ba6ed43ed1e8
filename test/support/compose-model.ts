// The scripted model as a compose service (test/integration/compose.test.ts runs it in the worker image, on the
// compose network, with tsx and test/support mounted): workers reach it as http://model:PORT, an
// address that never leaves this machine. A task "NAME sleep S" runs `sleep S` in the sandbox,
// writes /workspace/NAME.txt, and ends; any other task ends at once.
import { reply, startFakeAnthropic, text, toolUse } from "./fake-anthropic.js";
import { byTurn, taskOf } from "./scripts.js";

const port = Number(process.env.PORT ?? 8080);
const fake = await startFakeAnthropic(
  byTurn((body) => {
    const m = /^<task>\n(\S+) sleep (\d+(?:\.\d+)?)/.exec(taskOf(body));
    if (!m) return [reply(text("Done."))];
    return [
      reply(toolUse("bash", { command: `sleep ${m[2]}` })),
      reply(
        toolUse("str_replace_based_edit_tool", {
          command: "create",
          path: `/workspace/${m[1]}.txt`,
          file_text: `done ${m[1]}\n`,
        }),
      ),
      reply(text(`Done: ${m[1]}.`)),
    ];
  }),
  { port, host: "0.0.0.0" },
);
console.log(`scripted model listening on ${fake.url}`);
for (const sig of ["SIGTERM", "SIGINT"] as const)
  process.once(sig, () => void fake.close().then(() => process.exit(0)));
