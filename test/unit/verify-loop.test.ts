// Verify is part of the job: a failed verify goes back to the model, the result's patch is the
// one the final verify judged, and `verify_failed` says when it never passed. On the local backend
// (test/support/backend.ts): the loop is runJob's logic, not Docker's.
//
// Backend: local (runJob's logic).
import { afterEach, describe, expect, it } from "vitest";
import { reply, text, toolUse, type Reply } from "../support/fake-anthropic.js";
import { localBackend } from "../support/backend.js";
import { closeScripted, runScripted } from "../support/scripted-job.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
afterEach(closeScripted);

const run = (script: Reply[], spec: Record<string, unknown>) =>
  runScripted(script, { repo: { path: CLAMP }, ...spec }, "verify-loop", localBackend());

const bash = (command: string) => reply(toolUse("bash", { command }));
// Verify passes once fixed.txt says "good"; it leaves a byproduct that must never be in a patch.
const VERIFY = 'touch verify-byproduct.txt; echo checking; [ "$(cat fixed.txt 2>/dev/null)" = good ]';

describe("the verify loop (local backend, real SDK)", () => {
  it("feeds a failed verify back; the next attempt passes; the patch is the one verify passed", async () => {
    const { result, events, fake } = await run(
      [
        bash("echo bad > /workspace/fixed.txt"),
        reply(text("Done.")),
        bash("echo good > /workspace/fixed.txt"),
        reply(text("Fixed for real.")),
      ],
      { verify: VERIFY },
    );
    expect(result.status).toBe("completed");
    expect(result.verified).toBe(true);
    expect(result.verify?.exitCode).toBe(0);
    expect(result.turns).toBe(4);
    expect(result.summary).toBe("Fixed for real.");
    expect(result.filesChanged).toEqual(["fixed.txt"]);
    expect(result.patch).toMatch(/\+good\n/);
    expect(result.patch).not.toMatch(/verify-byproduct|\+bad/);

    // The model's request after the failed verify carries that verify's output, marked as such.
    const feedback = fake.requests[2]!.body.messages.at(-1);
    expect(feedback.role).toBe("user");
    const said =
      typeof feedback.content === "string"
        ? feedback.content
        : feedback.content.map((b: { text?: string }) => b.text ?? "").join("");
    expect(said).toMatch(/verify command failed with exit code 1/);
    expect(said).toMatch(/<verify_output>\s*checking\s*<\/verify_output>/);
    expect(said).toContain(VERIFY);

    const verifies = events.filter((e) => e.type === "verify");
    expect(verifies.map((v) => [v.round, v.exitCode])).toEqual([
      [1, 1],
      [2, 0],
    ]);
    expect(events.filter((e) => e.type === "patch")).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ type: "job_finished", status: "completed" });
  });

  it("ends verify_failed when verify still fails after the last round", async () => {
    const { result, events, fake } = await run(
      [reply(text("Done.")), reply(text("Still done.")), reply(text("Done again."))],
      { verify: VERIFY, verifyRounds: 2 },
    );
    expect(result.status).toBe("verify_failed");
    expect(result.verified).toBe(false);
    expect(result.verify?.exitCode).toBe(1);
    expect(result.error).toMatch(/verify failed \(exit 1\) after 3 rounds/);
    expect(fake.requests).toHaveLength(3);
    expect(events.filter((e) => e.type === "verify")).toHaveLength(3);
    expect(events.at(-1)).toMatchObject({ type: "job_finished", status: "verify_failed" });
  });

  it("verifyRounds 0 verifies once and reports", async () => {
    const { result, fake } = await run([reply(text("Done."))], { verify: "exit 3", verifyRounds: 0 });
    expect(result.status).toBe("verify_failed");
    expect(result.verify?.exitCode).toBe(3);
    expect(fake.requests).toHaveLength(1);
  });

  it("the rounds share the job's budgets: max_turns stops the loop and verify judges that patch", async () => {
    const { result, fake } = await run(
      [
        bash("echo bad > /workspace/fixed.txt"),
        reply(text("Done.")),
        bash("echo still-bad > /workspace/fixed.txt"),
        reply(text("x")),
      ],
      { verify: VERIFY, maxTurns: 3 },
    );
    expect(fake.requests).toHaveLength(3);
    expect(result.status).toBe("max_turns");
    expect(result.verified).toBe(false);
    expect(result.patch).toMatch(/\+still-bad/);
  });

  it("without verify there is no verified field", async () => {
    const { result } = await run([reply(text("Done."))], {});
    expect(result.status).toBe("completed");
    expect(result.verified).toBeUndefined();
  });
});
