// The library API of patchbay. The sandbox and the tools stand on their own, so an agent
// builder can use them with their own loop; the queue and the job use them together.
export { Sandbox } from "./sandbox/sandbox.js";
export type { SandboxOptions, ExecOptions, ExecResult, PutFile, SpawnOptions } from "./sandbox/sandbox-options.js";
export type { Shell, RunOptions, RunResult, KillOptions } from "./sandbox/shell.js";
export type { Files, FileStat, FileEntry, ReadOptions, WriteOptions } from "./sandbox/files.js";
export { FileError } from "./sandbox/files.js";
export { reap } from "./sandbox/reaper.js";
export type { OwnerAlive } from "./backend/owner.js";
export type {
  ReapReport,
  SandboxLimits,
  Backend,
  BackendKind,
  Box,
  BoxSpec,
  BoxState,
  Attached,
  ProcessOptions,
} from "./backend/types.js";
/** @deprecated use Backend (the interface was renamed: "runtime" now means only the OCI runtime, runc or runsc). */
export type SandboxRuntime = import("./backend/types.js").Backend;
export { buildImage, type BuildImageOptions, type BuildResult } from "./sandbox/image.js";
export {
  TextEditor,
  type EditorFs,
  type EditorStat,
  type EditorFlavor,
  type ToolOutput,
  type TextEditorOptions,
} from "./tools/editor.js";
export { BashTool, type BashToolOptions } from "./tools/bash-tool.js";
export { EditFileTool, type EditFileToolOptions } from "./tools/edit-file.js";
export { SandboxFs } from "./tools/editor-tool.js";
export {
  Toolbox,
  runTool,
  type ToolSet,
  type ToolUseBlock,
  type ToolRun,
  type ToolboxOptions,
  type RunToolOptions,
  type DefinitionsOptions,
} from "./tools/index.js";
export { runJob, type RunJobOptions } from "./job/run.js";
export { runAgentLoop, type LoopOptions, type LoopOutcome, type TurnState } from "./agent/loop.js";
export {
  AnthropicModel,
  ModelError,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type Message,
  type ContentBlock,
  type RetryInfo,
  type CompleteHooks,
  type AnthropicModelOptions,
} from "./agent/model.js";
export { costUsd, priceFor } from "./agent/prices.js";
export { PatchGoneError } from "./queue/result-bounds.js";
export {
  PatchbayClient,
  JobFailedError,
  JobNotFoundError,
  JobConflictError,
  WaitTimeoutError,
  ClientOptionsError,
  EnqueueLostError,
  enqueue,
  enqueueBatch,
  waitForResult,
  cancel,
  status,
  result,
  watch,
  list,
  closeDefaultClient,
  type ClientOptions,
  type WaitOptions,
  type WatchOptions,
  type ListOptions,
  type JobStatusInfo,
  type JobState,
  type ListState,
} from "./queue/client.js";
export { WorkerBoundsError } from "./queue/worker-bounds.js";
export {
  BatchClient,
  BatchConflictError,
  BatchFileError,
  type BatchCancel,
  BatchNotFoundError,
  LineProvenanceError,
  submitBatch,
  batchStatus,
  waitForBatch,
  retryBatch,
  cancelBatch,
  listBatches,
  batchSummary,
  parseBatchFile,
  readBatchFile,
  summaryMarkdown,
  type BatchStatus,
  type BatchJob,
  type BatchSummary,
  type BatchProgress,
  type BatchListEntry,
  type JobSummary,
  type SubmitBatchOptions,
  type SubmitBatchResult,
  type WaitForBatchOptions,
  type BatchStatusOptions,
  type ListBatchesOptions,
  type RetryBatchOptions,
  type WriteOutOptions,
  type LineJobsOptions,
  type BatchLine,
  type LineRef,
  type LineJobs,
} from "./batch/batches.js";
export {
  CampaignClient,
  type CampaignClientOptions,
  type CampaignRetryOptions,
  type TrackerOptions,
  type TrackerHandle,
} from "./campaign/campaigns.js";
export { parseCampaign, readCampaign, CampaignFileError, type Campaign, type CampaignRepo } from "./campaign/file.js";
export { CampaignNotFoundError } from "./campaign/store.js";
export type { CampaignStatus, TrackReport, CloseReport } from "./campaign/track.js";
export type { PublishOptions, PublishReport, PlannedChange } from "./campaign/publish.js";
export type { Changeset, ChangesetState, ChecksState, ReviewState } from "./campaign/changeset.js";
export type {
  Forge,
  ForgeRepo,
  PullRequestInput,
  PullRequestUpdate,
  PullRequestRef,
  PullRequestStatus,
} from "./campaign/forge/forge.js";
export { ForgeError } from "./campaign/forge/forge-error.js";
export { PublishError } from "./campaign/publish-git.js";
export { startWorker, type WorkerOptions, type WorkerHandle } from "./queue/worker.js";
export { startTracing, type Telemetry } from "./observability/telemetry.js";
export type { TelemetryConfig } from "./core/config/otel.js";
export { workerLogger, type Log, type LogFields, type LogFormat, type LoggerOptions } from "./observability/log.js";
export { JobSpec, JobResult, TranscriptEvent, parseJobSpec, assertJobSpec, JobSpecError } from "./core/spec/spec.js";
export { loadConfig, defaults, type Config } from "./core/config/config.js";
export { PatchbayError, SandboxLostError, kindOf, ERROR_KINDS, type ErrorKind } from "./core/errors.js";
export { parseRedisUrl, RedisUrlError, type RedisTarget } from "./redis/target.js";
export { RedisConnectError } from "./redis/probe.js";
