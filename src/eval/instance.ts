// A task set and a predictions file, read and checked before anything runs: SWE-bench's instance
// and prediction formats (its field names; FAIL_TO_PASS and PASS_TO_PASS as JSON arrays or as the
// JSON-encoded strings its dataset has), plus patchbay's own fields under `patchbay`. Everything in
// them is hostile: bounded, and every problem is named `file:line: field: what is wrong (got …)`,
// all of them in one EvalSetError. Pure: the caller reads the files.
import { isAbsolute, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { count } from "../core/count.js";
import { genericMessage, positiveNumber } from "../core/spec/fields.js";
import { JobSpec, Network } from "../core/spec/spec.js";
import { suggest } from "../core/suggest.js";
import { MAX_DURATION_SEC } from "../core/timeout.js";
import { EvalSetError, escapeUnsafe, readRecords, shownValue, type FileRecord } from "./records.js";
import { TEST_FORMATS, type EvalInstance, type Prediction } from "./types.js";

export { EvalSetError, MAX_INSTANCES, MAX_SET_BYTES } from "./records.js";

/**
 * An instance_id: one directory name (a run keeps each instance's files under it), as SWE-bench's
 * ids are (`django__django-11099`): a letter or digit, then up to 127 of letters, digits, `_ . + -`.
 */
export const INSTANCE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/;
/** The largest patch (test_patch, patch, model_patch), in bytes (UTF-8). */
export const MAX_PATCH_BYTES = 8 * 1024 * 1024;
/** At most this many test names in FAIL_TO_PASS or PASS_TO_PASS. */
export const MAX_TESTS_PER_LIST = 20_000;
/** The longest test name, in characters. */
export const MAX_TEST_NAME_CHARS = 2_000;

const want = (what: string) => (iss: { input?: unknown }) =>
  iss.input === undefined ? `required: ${what}` : `must be ${what} (got ${shownValue(iss.input)})`;

/** The run's own files beside the instances' directories (run-files.ts): no instance may be named so. */
const RUN_FILES = ["preds.jsonl", "summary.json"];

const InstanceId = z
  .string({ error: want("an instance id") })
  .regex(INSTANCE_ID_RE, { error: want("1-128 characters from A-Z a-z 0-9 _ . + -, starting with a letter or digit") })
  .refine((id) => !RUN_FILES.includes(id.toLowerCase()), {
    error: want(`an id other than the run's own files (${RUN_FILES.join(", ")}), whatever its case`),
  });

const Patch = z
  .string({ error: want("a patch (a unified diff, as text)") })
  .refine((s) => Buffer.byteLength(s, "utf8") <= MAX_PATCH_BYTES, {
    error: (iss) =>
      `must be at most ${count(MAX_PATCH_BYTES, "byte")} (8 MiB) (got ${Buffer.byteLength(String(iss.input))})`,
  });

/** A path relative to /workspace: no leading `/`, no `..` segment, no NUL. */
const RelativeFile = z
  .string({ error: want("a path relative to /workspace") })
  .min(1, { error: want("a path relative to /workspace") })
  .max(1024, { error: want("at most 1024 characters") })
  .refine((p) => !isAbsolute(p) && !p.split(/[\\/]/).includes("..") && !p.includes("\0"), {
    error: want('a path relative to /workspace, without ".." (it is read from the grading sandbox)'),
  });

const EvalTestSchema = z.strictObject({
  command: JobSpec.shape.verify.unwrap(),
  format: z.enum(TEST_FORMATS, { error: want(`one of ${TEST_FORMATS.join(", ")}`) }),
  file: RelativeFile.optional(),
  timeoutSec: positiveNumber()
    .max(MAX_DURATION_SEC, { error: want(`at most ${count(MAX_DURATION_SEC, "second")} (7 days)`) })
    .optional(),
});

const EvalEnvSchema = z.strictObject({
  repo: z
    .string({ error: want("a git URL or the path of a git repository") })
    .min(1, { error: want("a git URL or the path of a git repository") })
    .max(4096, { error: want("at most 4096 characters") }),
  image: JobSpec.shape.image,
  setup: JobSpec.shape.setup,
  network: Network.optional(),
  verify: JobSpec.shape.verify,
  test: EvalTestSchema,
});

/** An instance's fields but its test lists, which {@link testList} reads (arrays or JSON-encoded strings). */
const InstanceSchema = z.object({
  instance_id: InstanceId,
  repo: z
    .string({ error: want("the repository's name, owner/name") })
    .min(1, { error: want("the repository's name, owner/name") })
    .max(256, { error: want("at most 256 characters") }),
  base_commit: z
    .string({ error: want("a commit id") })
    .regex(/^[0-9a-fA-F]{7,64}$/, { error: want("a commit id, 7-64 hex digits") }),
  problem_statement: JobSpec.shape.task,
  test_patch: Patch,
  patch: Patch.optional(),
  patchbay: EvalEnvSchema,
});

/** patchbay's fields and SWE-bench's that patchbay reads: a key close to one of them is a typo. */
const FIELDS = [...Object.keys(InstanceSchema.shape), "FAIL_TO_PASS", "PASS_TO_PASS"];
/** SWE-bench's other fields, accepted and ignored (as any other key not close to a field patchbay reads). */
const IGNORED_FIELDS = ["version", "hints_text", "created_at", "environment_setup_commit", "image_assets"];
const KNOWN_UNDER: Record<string, readonly string[]> = {
  patchbay: Object.keys(EvalEnvSchema.shape),
  "patchbay.test": Object.keys(EvalTestSchema.shape),
  "patchbay.network": Object.keys(Network.shape),
  "patchbay.network.setup": ["allow", "credentials"],
};

const pathText = (path: readonly PropertyKey[]) =>
  path.reduce<string>((s, k) => (typeof k === "number" ? `${s}[${k}]` : s ? `${s}.${String(k)}` : String(k)), "");

/** Zod's issues as `field: what`, an unknown key with the key it was probably meant to be. */
function issueTexts(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.flatMap((iss) => {
    const where = pathText(iss.path);
    if (iss.code !== "unrecognized_keys") return [`${where || "(record)"}: ${iss.message}`];
    return iss.keys.map((key) => {
      const hint = suggest(key, KNOWN_UNDER[where] ?? []);
      return `${where ? `${where}.` : ""}${key}: unknown field${hint ? ` (did you mean "${hint}"?)` : ""}`;
    });
  });
}

/**
 * FAIL_TO_PASS or PASS_TO_PASS: a JSON array of test names, or a string holding one (as SWE-bench's
 * dataset has them); bounded. Problems are pushed as `field: what`; `undefined` when it is not usable.
 */
function testList(value: unknown, field: string, problems: string[]): string[] | undefined {
  let list = value;
  if (typeof value === "string") {
    try {
      list = JSON.parse(value) as unknown;
    } catch {
      problems.push(`${field}: must be a JSON array of test names, or a string holding one (got ${shownValue(value)})`);
      return undefined;
    }
  }
  if (!Array.isArray(list)) {
    problems.push(
      value === undefined
        ? `${field}: required: the test names, a JSON array (or a string holding one)`
        : `${field}: must be a JSON array of test names, or a string holding one (got ${shownValue(value)})`,
    );
    return undefined;
  }
  if (list.length > MAX_TESTS_PER_LIST) {
    problems.push(`${field}: must name at most ${count(MAX_TESTS_PER_LIST, "test")} (got ${list.length})`);
    return undefined;
  }
  const items: unknown[] = list;
  const bad = items.findIndex((t) => typeof t !== "string" || t === "" || t.length > MAX_TEST_NAME_CHARS);
  if (bad >= 0) {
    const more = items.filter((t) => typeof t !== "string" || t === "" || t.length > MAX_TEST_NAME_CHARS).length - 1;
    const got = items[bad];
    const what =
      typeof got === "string" && got.length > MAX_TEST_NAME_CHARS ? count(got.length, "character") : shownValue(got);
    problems.push(
      `${field}[${bad}]: must be a test name of at most ${count(MAX_TEST_NAME_CHARS, "character")}, not empty (got ${what})${more > 0 ? `, and ${more} more like it` : ""}`,
    );
    return undefined;
  }
  return items as string[];
}

/** The unknown top-level keys that look like a misspelt field patchbay reads. */
function typoProblems(obj: Record<string, unknown>): string[] {
  return Object.keys(obj).flatMap((key) => {
    if (FIELDS.includes(key) || IGNORED_FIELDS.includes(key)) return [];
    const hint = suggest(key, FIELDS);
    return hint && !(hint in obj) ? [`${key}: unknown field (did you mean "${hint}"?)`] : [];
  });
}

/** One record as an instance; its problems pushed as `field: what`. */
function readInstance(value: unknown, problems: string[]): EvalInstance | undefined {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    problems.push(`(record): must be an object, an instance (got ${shownValue(value)})`);
    return undefined;
  }
  const obj = value as Record<string, unknown>;
  const r = InstanceSchema.safeParse(obj, { error: genericMessage });
  if (!r.success) problems.push(...issueTexts(r.error.issues));
  problems.push(...typoProblems(obj));
  const f2p = testList(obj.FAIL_TO_PASS, "FAIL_TO_PASS", problems);
  const p2p = testList(obj.PASS_TO_PASS, "PASS_TO_PASS", problems);
  // With no FAIL_TO_PASS test, SWE-bench's grading counts every patch that keeps PASS_TO_PASS as resolved.
  if (f2p?.length === 0)
    problems.push("FAIL_TO_PASS: must name at least one test (with none, any patch that breaks nothing resolves it)");
  if (!r.success || !f2p || !p2p || f2p.length === 0) return undefined;
  return { ...r.data, FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p };
}

/** `file:line: …` problems in the order of their lines (a stable sort: a record's own stay in order). */
function byLine(problems: string[], file: string): string[] {
  const lineOf = (p: string) => parseInt(p.slice(file.length + 1), 10) || 0;
  return problems
    .map((p, i) => [lineOf(p), i, p] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map((x) => x[2]);
}

/** Each record's problems as `file:line: …`, duplicates of an instance_id refused; throws them all at once. */
function checkAll<T extends { instance_id: string }>(
  records: FileRecord[],
  file: string,
  problems: string[],
  read: (r: FileRecord, out: string[]) => T | undefined,
): T[] {
  const firstLine = new Map<string, number>();
  const out: T[] = [];
  for (const rec of records) {
    const own: string[] = [];
    const item = read(rec, own);
    problems.push(...own.map((p) => `${file}:${rec.line}: ${p}`));
    if (!item) continue;
    const first = firstLine.get(item.instance_id);
    if (first !== undefined)
      problems.push(
        `${file}:${rec.line}: instance_id: duplicate (got ${shownValue(item.instance_id)}, first at line ${first})`,
      );
    else firstLine.set(item.instance_id, rec.line);
    out.push(item);
  }
  if (problems.length > 0) throw new EvalSetError(byLine(problems, file).map(escapeUnsafe));
  return out;
}

/**
 * The instances of a task set: JSONL or a JSON array of SWE-bench instances with patchbay's fields
 * under `patchbay`. Throws an {@link EvalSetError} naming every problem (`file` names the set in it).
 */
export function parseTaskSet(text: string, file = "(task set)"): EvalInstance[] {
  const problems: string[] = [];
  const records = readRecords(text, file, problems);
  const set = checkAll(records, file, problems, (rec, own) => readInstance(rec.value, own));
  if (set.length === 0) throw new EvalSetError([`${file}:1: no instances: a task set names at least one`]);
  return set;
}

const PredictionSchema = z.object({
  instance_id: InstanceId,
  model_patch: z.union([Patch, z.null()], { error: want("a patch (a unified diff) or null") }),
  model_name_or_path: z
    .string({ error: want("the model's name") })
    .min(1, { error: want("the model's name") })
    .max(256, { error: want("at most 256 characters") }),
});

/** One record as a prediction; in a JSON object of predictions, its key is its instance_id. */
function readPrediction(rec: FileRecord, problems: string[]): Prediction | undefined {
  const v = rec.value;
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    problems.push(`${rec.key ?? "(record)"}: must be an object, a prediction (got ${shownValue(v)})`);
    return undefined;
  }
  const obj = { ...(v as Record<string, unknown>) };
  if (rec.key !== undefined) {
    if (obj.instance_id === undefined) obj.instance_id = rec.key;
    else if (obj.instance_id !== rec.key)
      problems.push(`instance_id: must be its key, ${shownValue(rec.key)} (got ${shownValue(obj.instance_id)})`);
  }
  const r = PredictionSchema.safeParse(obj, { error: genericMessage });
  if (!r.success) problems.push(...issueTexts(r.error.issues));
  return r.success && problems.length === 0 ? r.data : undefined;
}

/**
 * SWE-bench's predictions (`{ instance_id, model_patch, model_name_or_path }`): JSONL, a JSON array,
 * or a JSON object keyed by instance_id. Throws an {@link EvalSetError} naming every problem.
 */
export function parsePredictions(text: string, file = "(predictions)"): Prediction[] {
  const problems: string[] = [];
  const keyed = (o: Record<string, unknown>) => ("instance_id" in o && "model_patch" in o ? "one" : "keyed");
  const records = readRecords(text, file, problems, keyed);
  return checkAll(records, file, problems, readPrediction);
}

/**
 * Where an instance's repo is: a URL (`scheme://…`) or an scp-like git address (`user@host:path`)
 * as it is; a path made absolute against the directory of the set file.
 */
export function resolveRepo(repo: string, setDir: string): string {
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(repo) || /^[^/\s:@]+@[^/\s:]+:/.test(repo)) return repo;
  return resolve(setDir, repo);
}

/**
 * Whether a resolved repo is a local one (a path or a `file:` URL) outside `setDir`, the set file's
 * directory. A task set is often someone else's file, while its jobs are the operator's own (a
 * worker reads any local repo they name): `eval` keeps a set's local repos under its own directory
 * unless told otherwise.
 */
export function localRepoOutside(repo: string, setDir: string): boolean {
  let path = repo;
  if (/^file:/i.test(repo)) {
    try {
      path = fileURLToPath(repo);
    } catch {
      return true; // a file: URL that names no local path is not under the set's directory
    }
  } else if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(repo) || /^[^/\s:@]+@[^/\s:]+:/.test(repo)) return false;
  const rel = relative(resolve(setDir), resolve(setDir, path));
  return rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel);
}
