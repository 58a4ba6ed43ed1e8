// Phase 3 of a job (run.ts): the agent. A new attempt first looks for the last checkpoint of an
// earlier one and, where it fits this workspace, applies it (checkpoint.ts). Then the agent loop
// runs with the job's tools, model, budgets and checkpoints: from the start, from the checkpoint,
// or not at all when the earlier attempt's agent had already finished (the job goes on to its
// patch and verify). A run from the start first reads the repository's instructions
// (instructions.ts) for its first user message; one from a checkpoint has them in its conversation.
import { runAgentLoop, type LoopOptions, type LoopOutcome, type TurnState } from "../agent/loop.js";
import { modelFromConfig } from "../agent/model.js";
import { scriptedModelFor } from "../agent/scripted.js";
import { jobModel } from "../core/config/scripted.js";
import { costUsd } from "../agent/prices.js";
import { systemPrompt } from "../agent/prompt.js";
import { repoInstructionsBlock } from "../agent/repo-instructions.js";
import { readRepoInstructions } from "./instructions.js";
import { defaults } from "../core/config/config.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { customToolsOf, DEFAULT_EDITOR_TOOL, editorToolOf } from "../core/spec/spec.js";
import { Toolbox, type ToolSet, type ToolUseBlock } from "../tools/index.js";
import { McpHub } from "../tools/mcp.js";
import {
  Checkpointer,
  mayChangeFiles,
  type Checkpoint,
  type CheckpointStore,
  outcomeOf,
  RESUME_NOTE,
  RESUME_NOTE_PENDING,
  restoreCheckpoint,
  specHash,
  turnStateOf,
} from "./checkpoint.js";
import type { JobContext } from "./job-context.js";
import type { Prepared } from "./prepare.js";
import { SandboxLostError } from "../core/errors.js";
import { activeSpanAttrs, inSpan, modelId } from "../observability/trace.js";

export { SandboxLostError };

export interface AgentRun {
  outcome: LoopOutcome;
  /** The agent again, after a failed verify, with the same tools, budgets and checkpoints (a closure: passed on unbound). */
  resume: (from: LoopOutcome, message: string) => Promise<LoopOutcome>;
  /** The verify round the conversation is in (the checkpoints record it). */
  at: { round: number };
  /** Settles once the workspace is the agent's (its repo, the snapshot, the first fingerprint). */
  settled: Promise<void>;
}

export async function runAgent(ctx: JobContext, sandbox: Sandbox, prep: Prepared): Promise<AgentRun> {
  const { spec, config, opts } = ctx;
  const modelName = jobModel(spec, config);
  const store = opts.checkpoints;
  const restored =
    store && (await restoreCheckpoint(store, sandbox, () => prep.baseline, modelName, ctx.emit, prep.loaded));
  activeSpanAttrs({ "gen_ai.request.model": modelId(modelName), "patchbay.checkpoint.restored": Boolean(restored) });
  const cp = store && checkpointer(ctx, sandbox, prep, store, restored);
  // The workspace's first fingerprint after the agent's repo (the file agent serves one request at
  // a time): both before the first tool, while the first model request is out.
  const settled = prep.loaded.then(() => cp?.start());
  // Awaited by the first tool and by run.ts; a rejection meanwhile (git's check of the baseline
  // failed, the engine went) must not end the worker's process before one of them sees it.
  settled.catch(() => {});
  // Spend already counted by the earlier attempt: a batch's running total gets this attempt's part only.
  const before = restored ? costUsd(modelName, restored.usage) : 0;
  const stopAfterTurn =
    opts.stopAfterTurn && before ? (c: number) => opts.stopAfterTurn!(c - before) : opts.stopAfterTurn;
  const at = { round: restored?.round ?? 1 };
  const tools = editorToolOf(spec.tools) ?? DEFAULT_EDITOR_TOOL;
  const commandTimeoutSec = spec.commandTimeoutSec ?? defaults.job.commandTimeoutSec;
  // The spec's MCP servers, in the workspace once it is the agent's; one that cannot start fails the job (McpStartError).
  const mcp =
    spec.mcp && Object.keys(spec.mcp.servers).length
      ? await prep.loaded.then(() => McpHub.start(sandbox, spec.mcp!.servers, { timeoutSec: commandTimeoutSec }))
      : undefined;
  const toolbox = new Toolbox(sandbox, { tools, custom: customToolsOf(spec.tools), mcp, commandTimeoutSec });
  // A restored conversation keeps its own first message, the repository's instructions as first read.
  const repoInstructions = restored ? undefined : await loadRepoInstructions(ctx, sandbox, prep);
  const loop = {
    ...loopOptions(ctx, { sandbox, toolbox, tools, modelName, settled, cp, at, stopAfterTurn }),
    ...(repoInstructions ? { repoInstructions } : {}),
  };
  const outcome = await firstRun(loop, restored, modelName);
  // The round's end killed the agent's processes, MCP servers too: they start again for the next round.
  const resume = (from: LoopOutcome, message: string) =>
    inSpan(
      "patchbay.agent",
      { "patchbay.round": at.round },
      async () => (await mcp?.revive(), runAgentLoop({ ...loop, resume: { from, message } })),
    );
  return { outcome, at, settled, resume };
}

/**
 * The repository's instructions block for the first user message, read before the first model
 * request; none when the spec says `repoInstructions: false`. prepare() has returned: the repo is
 * in and nothing of setup's runs any more, and the reads (root's file agent, the agent's
 * permissions, nothing written) may go on while the agent's repo and the snapshot are made. A read
 * that fails because the load failed leaves that failure to the first tool and run.ts. The
 * transcript's instructions_loaded event says what was read.
 */
async function loadRepoInstructions(ctx: JobContext, sandbox: Sandbox, prep: Prepared): Promise<string | undefined> {
  if (ctx.spec.repoInstructions === false) return undefined;
  let r;
  try {
    r = await readRepoInstructions(sandbox.files);
  } catch (err) {
    if (
      await prep.loaded.then(
        () => true,
        () => false,
      )
    )
      throw err;
    return undefined;
  }
  ctx.emit({
    type: "instructions_loaded",
    files: r.files,
    bytes: r.bytes,
    cut: r.cut,
    ...(r.refused.length ? { refused: r.refused } : {}),
  });
  return repoInstructionsBlock(r);
}

/**
 * runAgent's Checkpointer: it stores the attempt's turns, going on from a restored checkpoint's
 * patch. The baseline is read when used: git's hash of the files may replace it before `loaded` (prepare.ts).
 */
function checkpointer(
  ctx: JobContext,
  sandbox: Sandbox,
  prep: Prepared,
  store: CheckpointStore,
  restored: Checkpoint | undefined,
): Checkpointer {
  return new Checkpointer({
    store,
    sandbox,
    get baseline() {
      return prep.baseline;
    },
    jobId: ctx.jobId,
    attempt: ctx.attempt,
    specHash: specHash(ctx.spec),
    emit: ctx.emit,
    maxBytes: ctx.config.checkpointMaxBytes,
    restored: restored?.patch,
  });
}

/** What runAgent hands loopOptions: the sandbox and its toolbox, and the attempt's checkpoint state. */
interface LoopParts {
  sandbox: Sandbox;
  toolbox: Toolbox;
  tools: ToolSet;
  modelName: string;
  settled: Promise<void>;
  cp: Checkpointer | undefined;
  at: { round: number };
  stopAfterTurn: LoopOptions["stopAfterTurn"];
}

/**
 * runAgent's loop options, the same for the first run and every resume: no tool runs before the
 * workspace is the agent's (`settled`), and a turn is checkpointed only after it too.
 */
function loopOptions(ctx: JobContext, p: LoopParts): LoopOptions {
  const { spec, config, opts } = ctx;
  const { sandbox, toolbox, settled, cp, at } = p;
  return {
    model: opts.model ?? (config.scripted ? scriptedModelFor(config.scripted) : modelFromConfig(config, spec.provider)),
    modelName: p.modelName,
    system: systemPrompt({ tools: p.tools, verify: spec.verify, instructions: spec.instructions }),
    task: spec.task,
    tools: toolbox.definitions(),
    runTool: async (block: ToolUseBlock, signal?: AbortSignal) => {
      await settled;
      if (mayChangeFiles(block)) cp?.touched();
      const r = await toolbox.run(block, signal);
      // A sandbox that is gone (its engine failed) fails every later tool: this attempt ends here,
      // and the next one goes on from the last checkpoint instead of the model talking to a corpse.
      // A shell that exited is not an error to the model (it may have run `exit`), but may mean the same.
      if ((r.isError || r.processLost) && !signal?.aborted) {
        const why = await sandbox.stopped();
        if (why)
          throw new SandboxLostError(
            `the sandbox stopped under the job: ${why} (the tool said: ${r.content.slice(0, 300)})`,
          );
      }
      return r;
    },
    maxTurns: spec.maxTurns,
    ...(config.contextWindow ? { contextWindow: config.contextWindow } : {}),
    compactAt: config.compactAt,
    maxTokens: spec.maxTokens,
    budget: spec.budget,
    signal: ctx.signal,
    emit: ctx.emit,
    stopAfterTurn: p.stopAfterTurn,
    onTurn: cp && (async (s: TurnState) => (await settled, cp.take(s, at.round))),
  };
}

/**
 * runAgent's first run of the loop: from the start, from a restored checkpoint, or none at all
 * when the earlier attempt's agent had already ended (its outcome is the checkpoint's).
 */
async function firstRun(loop: LoopOptions, restored: Checkpoint | undefined, modelName: string): Promise<LoopOutcome> {
  if (restored?.ended) return outcomeOf({ ...restored, ended: restored.ended }, modelName);
  return runAgentLoop(
    restored
      ? {
          ...loop,
          resume: {
            from: turnStateOf(restored),
            message: restored.messages.at(-1)?.role === "assistant" ? RESUME_NOTE_PENDING : RESUME_NOTE,
            sendAll: true,
          },
        }
      : loop,
  );
}
