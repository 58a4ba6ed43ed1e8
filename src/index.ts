// The library API of patchbay. The sandbox and the tools stand on their own, so an agent
// builder can use them with their own loop; the queue and the job use them together.
export { Sandbox, type SandboxOptions, type ExecResult } from "./sandbox/sandbox.js";
export type { RunOptions, RunResult } from "./sandbox/shell.js";
export type { FileStat, FileEntry } from "./sandbox/files.js";
export { FileError } from "./sandbox/files.js";
export { reap } from "./sandbox/reaper.js";
export type { ReapReport, SandboxLimits, SandboxRuntime, Box, BoxSpec, BoxState, Attached, ProcessOptions } from "./runtime/types.js";
export { buildImage } from "./sandbox/image.js";
export { TextEditor, type EditorFs, type EditorFlavor, type ToolOutput } from "./tools/editor.js";
export { BashTool } from "./tools/bash-tool.js";
export { EditFileTool } from "./tools/edit-file.js";
export { SandboxFs } from "./tools/editor-tool.js";
export { Toolbox, runTool, type ToolSet, type ToolUseBlock, type ToolRun } from "./tools/index.js";
export { runJob, type RunJobOptions } from "./job/run.js";
export { runAgentLoop, type LoopOptions, type LoopOutcome } from "./agent/loop.js";
export { AnthropicModel, ModelError, type Model, type ModelRequest, type ModelResponse } from "./agent/model.js";
export { costUsd, priceFor } from "./agent/prices.js";
export { PatchGoneError } from "./queue/result-bounds.js";
export { PatchbayClient, JobFailedError, JobNotFoundError, JobConflictError, WaitTimeoutError, ClientOptionsError, enqueue, enqueueBatch, waitForResult, cancel, status, result, watch, list, closeDefaultClient, type ClientOptions, type WaitOptions, type JobStatusInfo, type JobState, type ListState } from "./queue/client.js";
export { BatchClient, BatchConflictError, BatchFileError, BatchNotFoundError, submitBatch, batchStatus, waitForBatch, retryBatch, cancelBatch, listBatches, batchSummary, parseBatchFile, readBatchFile, summaryMarkdown, type BatchStatus, type BatchJob, type BatchSummary, type BatchProgress, type BatchListEntry, type JobSummary, type SubmitBatchOptions, type SubmitBatchResult, type WaitForBatchOptions } from "./queue/batch.js";
export { startWorker, type WorkerOptions, type WorkerHandle } from "./queue/worker.js";
export { startTracing, type Telemetry } from "./telemetry.js";
export { workerLogger, type Log, type LogFields, type LogFormat } from "./log.js";
export { JobSpec, JobResult, TranscriptEvent, parseJobSpec, assertJobSpec, JobSpecError } from "./spec.js";
export { loadConfig, defaults, type Config } from "./config.js";
export { PatchbayError, SandboxLostError, kindOf, ERROR_KINDS, type ErrorKind } from "./errors.js";
