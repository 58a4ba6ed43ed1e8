// Worker logs: one line per event, each with a timestamp, the worker id and (for job events) the
// job id. "text" for people (`2026-11-30T08:00:00.000Z [worker host:123] job 7 attempt 1: started`),
// "json" for log collectors (pino's format: level, time, worker, job, attempt, msg).
import { pino } from "pino";
import { safeText } from "../core/term.js";

export const LOG_FORMATS = ["text", "json"] as const;
/** A worker log's format: text for people, json (pino's) for log collectors. */
export type LogFormat = (typeof LOG_FORMATS)[number];

/** A log line's structured fields besides its message. */
export interface LogFields {
  /** The job the line is about. */
  job?: string;
  /** Its attempt. */
  attempt?: number;
  /**
   * How bad it is.
   * @default "info"
   */
  level?: "info" | "warn" | "error";
  [key: string]: unknown;
}

/** A worker's logger: a message (one line) and structured fields. */
export type Log = (msg: string, fields?: LogFields) => void;

/** How workerLogger writes. */
export interface LoggerOptions {
  /**
   * The lines' format.
   * @default "text"
   */
  format?: LogFormat;
  /**
   * Where lines go.
   * @default stderr
   */
  write?: (line: string) => void;
}

/**
 * JSON escapes only C0 controls, so a log line could still carry a C1 control (U+009B is the 8-bit
 * CSI a terminal obeys), a bidi override or a line separator from a repo's or a model's text. Each
 * is written as its `\\uXXXX` escape instead: the line means the same to a JSON reader, and a
 * terminal showing it raw sees only ASCII.
 */
const escapeInvisible = (line: string) =>
  line.replace(
    /[\u0080-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );

const toStderr = (line: string) => void process.stderr.write(line);

/** A worker's logger: one line per event, with a timestamp and the worker's id, in text or JSON. */
export function workerLogger(workerId: string, opts: LoggerOptions = {}): Log {
  const write = opts.write ?? toStderr;
  if (opts.format === "json") {
    const logger = pino(
      { base: { worker: workerId }, timestamp: pino.stdTimeFunctions.isoTime },
      { write: (line: string) => write(escapeInvisible(line)) },
    );
    return (msg, { level = "info", ...fields } = {}) => logger[level](fields, msg);
  }
  return (msg, fields = {}) => {
    const level = fields.level && fields.level !== "info" ? `${fields.level.toUpperCase()} ` : "";
    const job = fields.job !== undefined && !msg.includes(`job ${fields.job}`) ? `job ${fields.job}: ` : "";
    write(`${new Date().toISOString()} [worker ${workerId}] ${level}${job}${safeText(msg, { oneLine: true })}\n`);
  };
}
