// Worker logs: one line per event, each with a timestamp, the worker id and (for job events) the
// job id. "text" for people (`2026-11-30T08:00:00.000Z [worker host:123] job 7 attempt 1: started`),
// "json" for log collectors (pino's format: level, time, worker, job, attempt, msg).
import { pino } from "pino";
import { safeText } from "./term.js";

export const LOG_FORMATS = ["text", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface LogFields {
  job?: string;
  attempt?: number;
  level?: "info" | "warn" | "error";
  [key: string]: unknown;
}

/** A worker's logger: a message (one line) and structured fields. */
export type Log = (msg: string, fields?: LogFields) => void;

export interface LoggerOptions {
  format?: LogFormat;
  /** Where lines go; default stderr. */
  write?: (line: string) => void;
}

const toStderr = (line: string) => void process.stderr.write(line);

export function workerLogger(workerId: string, opts: LoggerOptions = {}): Log {
  const write = opts.write ?? toStderr;
  if (opts.format === "json") {
    const logger = pino({ base: { worker: workerId }, timestamp: pino.stdTimeFunctions.isoTime }, { write });
    return (msg, { level = "info", ...fields } = {}) => logger[level](fields, msg);
  }
  return (msg, fields = {}) => {
    const level = fields.level && fields.level !== "info" ? `${fields.level.toUpperCase()} ` : "";
    const job = fields.job !== undefined && !msg.includes(`job ${fields.job}`) ? `job ${fields.job}: ` : "";
    write(`${new Date().toISOString()} [worker ${workerId}] ${level}${job}${safeText(msg, { oneLine: true })}\n`);
  };
}
