// The file agent's protocol (src/sandbox/py/file_agent.py), typed: every request the worker sends,
// the reply each gets (checked with zod: a reply that does not fit is a protocol violation and the
// agent is restarted), the version both sides speak, and the one errno table. The framing (a JSON
// line and a body) is the FileAgent's (file-agent.ts); this is only what the lines say.
import { z } from "zod";

/**
 * Bumped with any change to a request or a reply that an agent of the version before would
 * misread; the agent says its own in `hello`. A field an older agent would act on wrongly (a
 * write's `splice`) is sent only to an agent whose `hello` names it in `has` (FEATURES); one it
 * may leave out without harm (a stat's `read`) needs no name.
 */
export const PROTOCOL_VERSION = 2;

/** What an agent of this version does beyond version 2's first form, named in its hello's `has`. */
export const FEATURES = ["splice"] as const;
export type AgentFeature = (typeof FEATURES)[number];

/** The errno codes the agent reports by name (any other OSError is EIO): given to it at start. */
export const ERRNO = {
  1: "EPERM",
  2: "ENOENT",
  13: "EACCES",
  20: "ENOTDIR",
  21: "EISDIR",
  27: "EFBIG",
  28: "ENOSPC",
  30: "EROFS",
} as const;
/** What an error reply's `error` may say: an errno code, or one of the agent's own. */
export type AgentErrorCode = (typeof ERRNO)[keyof typeof ERRNO] | "EIO" | "EINVAL" | "ECHANGED";

export type AgentRequest =
  | { op: "hello" }
  /**
   * `read`: a regular file of at most that many bytes comes back as the reply's body (`read: true`,
   * `size` the bytes read), read through the same open as a `read` op's, so a view or an edit
   * needs no read of its own. `have`: the sha256 of content the worker holds; when what was read
   * has it, no body is sent (`same: true`).
   */
  | { op: "stat"; path: string; read?: number; have?: string }
  /**
   * `head`: a file larger than `max` gives its first `max` bytes instead of an EFBIG error.
   * `nofollow`: no symlink on the path is followed, each component opened below the last (EINVAL).
   */
  | { op: "read"; path: string; max: number; head?: boolean; nofollow?: boolean }
  /**
   * `expect`: written only if the file's content has that sha256 (else ECHANGED).
   * `splice` [at, cut] (with `expect`, to an agent whose hello has "splice"): the body replaces the
   * `cut` bytes at offset `at` of the content checked, rather than the whole file, so an edit of a
   * large file sends only what it changes.
   */
  | { op: "write"; path: string; mode?: number; expect?: string; splice?: [number, number] }
  | { op: "mkdirp"; path: string }
  | { op: "remove"; path: string }
  | { op: "list"; path: string }
  | { op: "digest"; path: string; max: number }
  | {
      op: "run";
      argv: string[];
      uid: number;
      gid: number;
      cwd?: string;
      env: string[];
      timeout: number;
      max: number;
      stream: boolean;
      put?: [string, number][];
    };
export type AgentOp = AgentRequest["op"];

const int = z.number().int();
const FileType = z.enum(["file", "directory", "other"]);

/** Each op's reply header (besides `len`) when it did not fail. */
export const REPLIES = {
  hello: z.object({
    pid: int,
    root: z.boolean(),
    version: int,
    has: z.array(z.string().max(64)).max(64).optional(),
  }),
  stat: z.union([
    z.object({ missing: z.literal(true) }),
    z.object({
      type: FileType,
      size: int,
      mode: int,
      mtime: z.number(),
      real: z.string(),
      link: z.boolean(),
      read: z.literal(true).optional(),
      same: z.literal(true).optional(),
    }),
  ]),
  read: z.object({ mode: int, uid: int, gid: int, real: z.string() }),
  write: z.object({}),
  mkdirp: z.object({}),
  remove: z.object({}),
  list: z.object({ entries: z.array(z.string()) }),
  digest: z.union([z.object({ digest: z.string().regex(/^[0-9a-f]{40}$/) }), z.object({ over: z.literal(true) })]),
  run: z.object({
    exit: int,
    out: int.nonnegative(),
    err: int.nonnegative(),
    truncated: z.boolean(),
    timedOut: z.boolean(),
  }),
} satisfies Record<AgentOp, z.ZodType>;

/** An error reply: the code, the OS's words, and for reads over the bound the file's size. */
export const ErrorReply = z.object({
  error: z.string().max(64),
  message: z.string().max(4096).optional(),
  size: int.optional(),
});
export type ErrorReply = z.infer<typeof ErrorReply>;

export type AgentReplyOf<Op extends AgentOp> = z.infer<(typeof REPLIES)[Op]>;

/** A reply header checked against the request's op: the typed reply, the error, or undefined when it fits neither. */
export function parseReply<Op extends AgentOp>(
  op: Op,
  header: unknown,
): { ok: true; reply: AgentReplyOf<Op> } | { ok: false; error: ErrorReply } | undefined {
  const err = ErrorReply.safeParse(header);
  if (err.success) return { ok: false, error: err.data };
  const r = (REPLIES[op] as unknown as z.ZodType<AgentReplyOf<Op>>).safeParse(header);
  return r.success ? { ok: true, reply: r.data } : undefined;
}

/** The agent program's argv[1]: the agent's ids and the errno table. */
export const agentArgs = (uid: number, gid: number) => JSON.stringify({ uid, gid, errno: ERRNO });
