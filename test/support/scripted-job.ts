// runJob (no queue) against the scripted model: a fresh fake server per job, closed by closeScripted.
import { AnthropicModel } from "../../src/agent/model.js";
import { runJob } from "../../src/job/run.js";
import type { Backend } from "../../src/backend/types.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { startFakeAnthropic, type FakeAnthropic, type Reply } from "./fake-anthropic.js";

let fake: FakeAnthropic | undefined;

/** Runs `spec` (task "t" unless given) with the script on `backend` (default: the configured one, Docker in tests); `label` scopes the sandboxes (patchbay.test). */
export async function runScripted(script: Reply[], spec: Record<string, unknown>, label: string, backend?: Backend) {
  await closeScripted();
  fake = await startFakeAnthropic(script);
  const events: TranscriptEvent[] = [];
  const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
  const result = await runJob(
    { task: "t", ...spec },
    { model, onEvent: (e) => events.push(e), labels: { "patchbay.test": label }, backend },
  );
  return { result, events, fake };
}

/** Closes the last job's fake server (for an afterEach). */
export async function closeScripted(): Promise<void> {
  await fake?.close();
  fake = undefined;
}
