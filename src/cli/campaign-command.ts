// `patchbay campaign run | submit | status | publish | track | close | retry | list | tracker`: one
// change over many repositories, ending as pull requests. A campaign is a batch (same id: `batch
// wait`, `batch status`, `batch cancel` work on it) plus its changesets. The library side is
// src/campaign/, loaded when a command runs (not for --help).
import { count } from "../core/count.js";
import { existsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import {
  CliError,
  CONNECTION_USAGE,
  connectionFlags,
  duration,
  listFlag,
  numberFlag,
  stringFlag,
  UsageError,
  type ClientArgs,
  type Command,
} from "./command.js";
import { safeText } from "../core/term.js";
import { spendText } from "../campaign/cost.js";
import { JOB_STATUSES, type JobStatusName } from "../core/spec/names.js";
import type { PatchbayClient } from "../queue/client.js";
import type { CampaignClient } from "../campaign/campaigns.js";
import type { Campaign } from "../campaign/file.js";
import type { Changeset } from "../campaign/changeset.js";

const safe = (s: string) => safeText(s, { oneLine: true });

async function readFileArg(file: string): Promise<Campaign> {
  const { readCampaign, CampaignFileError } = await import("../campaign/file.js");
  try {
    return await readCampaign(file);
  } catch (err) {
    if (err instanceof CampaignFileError) throw new UsageError(err.message);
    throw err;
  }
}

/** FILE|ID: a campaign file (its name is the id) or the id itself. */
async function campaignId(arg: string): Promise<string> {
  return existsSync(arg) && statSync(arg).isFile() ? (await readFileArg(arg)).name : arg;
}

async function withCampaigns<T>(
  args: ClientArgs,
  fn: (cc: CampaignClient, c: PatchbayClient) => Promise<T>,
): Promise<T> {
  const { withClient } = await import("./queue-connect.js");
  const { CampaignClient } = await import("../campaign/campaigns.js");
  const { CampaignNotFoundError, CampaignBusyError } = await import("../campaign/store.js");
  const { BatchNotFoundError, BatchConflictError } = await import("../batch/batches.js");
  return withClient(args, async (c) => {
    const onWait = (w: { host: string; reason: string; seconds: number }) =>
      process.stderr.write(`patchbay: ${safe(w.host)}: ${w.reason}; waiting ${w.seconds} s\n`);
    try {
      return await fn(new CampaignClient(c, args.config(), { onWait }), c);
    } catch (err) {
      if (
        err instanceof CampaignNotFoundError ||
        err instanceof CampaignBusyError ||
        err instanceof BatchNotFoundError ||
        err instanceof BatchConflictError
      )
        throw new CliError(err.message);
      throw err;
    }
  });
}

const FILE_OR_ID = "FILE|ID: the campaign file, or its name.";

async function submitCampaign(cc: CampaignClient, file: string) {
  const campaign = await readFileArg(file);
  const r = await cc.submit(campaign);
  const again = campaign.lines.length - r.added;
  process.stderr.write(
    `patchbay: campaign ${r.batchId}: ${count(r.added, "job")} enqueued on queue ${cc.c.queueName}${again ? ` (${again} were already there)` : ""}\n`,
  );
  return r;
}

const submit: Command = {
  summary: "enqueue a campaign file's jobs (one per repository); print its id",
  usage: `patchbay campaign submit campaign.yaml [--json]

Checks the whole file (every problem named file:line; one bad line enqueues nothing), then
enqueues one job per repository as the batch named after the campaign (submitting the same file
again adds nothing). See docs/campaigns.md for the file.
Exit status: 0 enqueued; 1 Redis unreachable, or the name is taken by other jobs; 2 a bad file.

  --json                 print {"batchId", "ids", "added"}
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "campaign.yaml" },
  async run({ values, positionals, config }) {
    await readFileArg(positionals[0]!);
    return withCampaigns({ values, config }, async (cc) => {
      const r = await submitCampaign(cc, positionals[0]!);
      console.log(values.json ? JSON.stringify(r) : r.batchId);
      process.stderr.write(
        `patchbay: next: patchbay batch wait ${r.batchId}${cc.c.hintFlags()}, then patchbay campaign publish ${r.batchId}${cc.c.hintFlags()} --dry-run\n`,
      );
      return 0;
    });
  },
};

const run: Command = {
  summary: "submit a campaign and wait for its jobs (submit + batch wait)",
  usage: `patchbay campaign run campaign.yaml [--out DIR] [--json]

campaign submit, then batch wait with its progress; DIR (default ./patchbay-out/<campaign>) gets
each job's patch, transcript and result, and summary.json/summary.md with the changesets' table.
Then: patchbay campaign publish <campaign> (--dry-run first).
Exit status: as batch wait (0 every job completed; 1 failed, 3 verify_failed, 4, 5; 130).

  --out DIR              where to write the results and the summary
  --json                 print the summary as JSON on stdout
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, out: { type: "string" }, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "campaign.yaml" },
  async run({ values, positionals, config }) {
    await readFileArg(positionals[0]!);
    return withCampaigns({ values, config }, async (cc, c) => {
      const r = await submitCampaign(cc, positionals[0]!);
      const { waitAndReport } = await import("./batch-command.js");
      const { BatchClient } = await import("../batch/batches.js");
      const out = resolve(stringFlag(values, "out") ?? join("patchbay-out", r.batchId));
      const code = await waitAndReport(new BatchClient(c), c, r.batchId, { ...values, json: false }, out);
      if (code !== 130) {
        const s = await cc.writeSummary(r.batchId, out);
        if (values.json) console.log(JSON.stringify(s));
        process.stderr.write(`patchbay: next: patchbay campaign publish ${r.batchId}${c.hintFlags()} --dry-run\n`);
      }
      return code;
    });
  },
};

function changesetLine(c: Changeset): string {
  const link = c.url ?? c.branch ?? "";
  const extra = [
    c.checks && c.checks !== "none" ? `checks ${c.checks}` : "",
    c.review && c.review !== "none" ? c.review : "",
    c.verified === false ? "unverified" : "",
  ]
    .filter(Boolean)
    .join(", ");
  return safe(
    [String(c.line).padStart(3), c.state.padEnd(11), c.repo, link, extra, c.reason ?? ""].filter(Boolean).join("  "),
  ).slice(0, 400);
}

const status: Command = {
  summary: "a campaign's changesets: state, checks, review and link per repository",
  usage: `patchbay campaign status FILE|ID [--json] [--out DIR]

The counts at the top (merged of total, then by state: unpublished, draft, open, merged, closed,
conflict; checks of the open ones; the spend and the cost per merged change), then one line per repository: state, link, checks, review,
why. As last recorded: campaign track refreshes them from the forges. ${FILE_OR_ID}
Exit status: 0; 1 an unknown campaign or Redis unreachable; 2 usage.

  --json                 print the whole status as JSON
  --out DIR              write DIR/summary.json and DIR/summary.md (with the changesets' table)
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" }, out: { type: "string" } },
  positionals: { min: 1, max: 1, name: "FILE|ID" },
  async run({ values, positionals, config }) {
    const id = await campaignId(positionals[0]!);
    return withCampaigns({ values, config }, async (cc) => {
      const st = await cc.status(id);
      const out = stringFlag(values, "out");
      if (out !== undefined) await cc.writeSummary(id, resolve(out));
      if (values.json) return (console.log(JSON.stringify(st)), 0);
      const b = st.batch;
      console.log(
        `campaign ${id}: ${st.counts.merged} merged of ${st.changesets.length} · ${Object.entries(st.counts)
          .filter(([, n]) => n)
          .map(([k, n]) => `${k} ${n}`)
          .join(" · ")}`,
      );
      console.log(
        `jobs: ${b.done}/${b.total} done${b.running ? `, ${b.running} running` : ""}${b.waiting ? `, ${b.waiting} waiting` : ""} · verify ${b.verified} passed, ${b.unverified} failed`,
      );
      console.log(`cost: ${spendText(b.spentUsd, st.counts.merged)}`);
      if (st.checks.passing + st.checks.failing + st.checks.pending)
        console.log(
          `checks of open changesets: ${st.checks.passing} passing, ${st.checks.failing} failing, ${st.checks.pending} pending`,
        );
      for (const c of st.changesets) console.log(changesetLine(c));
      return 0;
    });
  },
};

/**
 * What is left of a publish, from the rate so far: `ETA 1m30s` while repositories remain (none
 * before the first is done), `done` after the last.
 */
export function publishEta(done: number, total: number, elapsedMs: number): string {
  if (done >= total) return "done";
  if (done <= 0) return "ETA unknown";
  return `ETA ${duration((elapsedMs / done) * (total - done))}`;
}

/** A bar redrawn in place on a terminal (done/total, ETA), else a line per repository ending in the ETA. */
function publishProgress(total: number) {
  const t0 = Date.now();
  const tty = Boolean(process.stderr.isTTY);
  return (p: { done: number; changeset: Changeset }) => {
    const eta = publishEta(p.done, total, Date.now() - t0);
    const line = `[${p.done}/${total}] ${changesetLine(p.changeset)}`;
    if (!tty) return void process.stderr.write(`${line} · ${eta}\n`);
    const width = 30;
    const filled = Math.round((p.done / total) * width);
    process.stderr.write(
      `\r\x1b[K${line.slice(0, (process.stderr.columns || 100) - 1)}\n[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${p.done}/${total} · ${eta}`,
    );
    if (p.done === total) process.stderr.write("\n");
  };
}

const publish: Command = {
  summary: "push a branch and open a draft pull request per verified change",
  usage: `patchbay campaign publish FILE|ID [--dry-run] [--include-unverified] [--include-scripted] [--force] [--json]

For each repository whose job completed with a verified patch: a fetch of the repository (a bare
clone kept under ~/.cache/patchbay/publish), the patch applied to the job's base commit and, if
the target branch moved, rebased onto its tip (a conflict marks the changeset conflict; campaign
retry --status conflict runs the job again); a commit from the campaign's commit settings; the
branch (default patchbay/<campaign>) pushed with a lease, so publishing again updates it and
changes nothing when nothing changed; on GitHub or GitLab (a token for the host) a pull or merge
request, a draft unless publish.draft is false; plain git remotes get the branch only.
Credentials stay on this host: GITHUB_TOKEN (github.com), GITLAB_TOKEN (gitlab.com),
PATCHBAY_FORGE_TOKEN_<HOST> with PATCHBAY_FORGES for other hosts; else git's own credential
helpers and SSH agent. ${FILE_OR_ID}
Exit status: 0 done (conflicts and unpublished jobs included); 1 a repository failed to publish
(the others went on; campaign status says why), an unknown campaign or Redis unreachable; 2 usage.

  --dry-run              print per repository the branch, title and diffstat; touch nothing
  --include-unverified   also publish completed jobs whose verify failed or had none (marked)
  --include-scripted     also publish jobs a scripted model answered (patchbay worker --scripted)
  --force                push over a branch holding commits patchbay did not push
  --json                 print the report as JSON
${CONNECTION_USAGE}`,
  options: {
    ...connectionFlags,
    "dry-run": { type: "boolean" },
    "include-unverified": { type: "boolean" },
    "include-scripted": { type: "boolean" },
    force: { type: "boolean" },
    json: { type: "boolean" },
  },
  positionals: { min: 1, max: 1, name: "FILE|ID" },
  async run({ values, positionals, config }) {
    const id = await campaignId(positionals[0]!);
    return withCampaigns({ values, config }, async (cc) => {
      const total = (await cc.status(id)).changesets.length;
      const dryRun = Boolean(values["dry-run"]);
      const r = await cc.publish(id, {
        dryRun,
        includeUnverified: Boolean(values["include-unverified"]),
        includeScripted: Boolean(values["include-scripted"]),
        force: Boolean(values.force),
        ...(dryRun || values.json ? {} : { onProgress: publishProgress(total) }),
      });
      if (values.json) console.log(JSON.stringify(r));
      else if (dryRun)
        for (const p of r.planned)
          console.log(
            [String(p.line), safe(p.repo), safe(p.branch), safe(p.title), ...(p.verified ? [] : ["(unverified)"])].join(
              "\t",
            ) + `\n${safeText(p.diffstat)}`,
          );
      const inState = (s: string) => r.changesets.filter((c) => c.state === s).length;
      process.stderr.write(
        dryRun
          ? `patchbay: dry run: ${count(r.planned.length, "changeset")} would be pushed; nothing was\n`
          : `patchbay: campaign ${id}: ${inState("draft") + inState("open")} open (${inState("draft")} draft), ${inState("conflict")} conflict, ${inState("unpublished")} unpublished${r.errors ? `, ${r.errors} failed to publish (campaign status ${id} says why)` : ""}\n`,
      );
      return r.errors ? 1 : 0;
    });
  },
};

const track: Command = {
  summary: "refresh the campaign's changesets from their forges",
  usage: `patchbay campaign track FILE|ID [--json]

Reads each published changeset's pull request from its forge (state, CI checks, review) and
records it; plain git remotes: whether the branch is still there. Also done on the queue every
10 minutes after a publish while changesets are open, by \`patchbay campaign tracker\`. ${FILE_OR_ID}
Exit status: 0; 1 a forge failed for some (campaign status says which), an unknown campaign; 2 usage.

  --json                 print {"tracked", "errors", "open"}
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "FILE|ID" },
  async run({ values, positionals, config }) {
    const id = await campaignId(positionals[0]!);
    return withCampaigns({ values, config }, async (cc) => {
      const r = await cc.track(id);
      if (values.json) console.log(JSON.stringify(r));
      process.stderr.write(
        `patchbay: campaign ${id}: ${count(r.tracked, "changeset")} refreshed, ${r.open} still open${r.errors ? `, ${r.errors} failed` : ""}\n`,
      );
      return r.errors ? 1 : 0;
    });
  },
};

async function confirmed(question: string): Promise<boolean> {
  if (!process.stdin.isTTY)
    throw new UsageError(`${question} needs a confirmation: pass --yes (stdin is not a terminal)`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim());
  } finally {
    rl.close();
  }
}

const close: Command = {
  summary: "close the campaign's open pull or merge requests and delete their branches",
  usage: `patchbay campaign close FILE|ID [--yes] [--json]

Closes every open (or draft) pull or merge request of the campaign and deletes its branch, if the
branch is still at the commit patchbay pushed (a branch with other commits is kept, and said so);
on a plain git remote, the changeset is its branch, deleted the same way. Asks first on a
terminal; --yes for scripts. ${FILE_OR_ID}
Exit status: 0; 1 some could not be closed, an unknown campaign; 2 usage (no --yes off a terminal).

  --yes                  do not ask
  --json                 print {"closed", "errors"}
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, yes: { type: "boolean" }, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "FILE|ID" },
  async run({ values, positionals, config }) {
    const id = await campaignId(positionals[0]!);
    return withCampaigns({ values, config }, async (cc) => {
      const open = (await cc.status(id)).changesets.filter((c) => c.state === "draft" || c.state === "open");
      if (!open.length) return (process.stderr.write(`patchbay: campaign ${id} has no open changesets\n`), 0);
      const { closeQuestion } = await import("../campaign/changeset.js");
      if (!values.yes && !(await confirmed(closeQuestion(id, open))))
        return (process.stderr.write("patchbay: nothing closed\n"), 1);
      const r = await cc.close(id);
      if (values.json) console.log(JSON.stringify(r));
      process.stderr.write(
        `patchbay: campaign ${id}: ${r.closed} closed${r.errors ? `, ${r.errors} failed (campaign status ${id} says why)` : ""}\n`,
      );
      return r.errors ? 1 : 0;
    });
  },
};

const RETRY_STATES = ["conflict", ...JOB_STATUSES] as const;

const retry: Command = {
  summary: "run again the jobs of changesets in conflict (or of jobs that ended badly)",
  usage: `patchbay campaign retry FILE|ID --status STATUS,... [--json]

Runs again, as new jobs of the campaign (<campaign>-L<line>-r<n>), the repositories whose
changeset is in conflict (--status conflict: the target branch moved; the new job starts from its
new tip) or whose latest job ended with one of the job statuses. Then publish again. ${FILE_OR_ID}
Exit status: 0 (also when nothing matched); 1 an unknown campaign or Redis unreachable; 2 usage.

  --status STATUS        repeatable or comma-separated: ${RETRY_STATES.join(", ")}
  --json                 print {"ids"}
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, status: { type: "string", multiple: true }, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "FILE|ID" },
  async run({ values, positionals, config }) {
    const statuses = listFlag(values, "status");
    if (!statuses?.length) throw new UsageError(`--status is required: ${RETRY_STATES.join(", ")}`);
    const bad = statuses.filter((s) => !(RETRY_STATES as readonly string[]).includes(s));
    if (bad.length) throw new UsageError(`--status takes ${RETRY_STATES.join(", ")}, not '${safe(bad.join(", "))}'`);
    const id = await campaignId(positionals[0]!);
    return withCampaigns({ values, config }, async (cc) => {
      const r = await cc.retry(id, {
        states: statuses.includes("conflict") ? ["conflict"] : [],
        statuses: statuses.filter((s) => s !== "conflict") as JobStatusName[],
      });
      if (values.json) console.log(JSON.stringify({ ids: r.ids }));
      else if (!r.ids.length) process.stderr.write(`patchbay: nothing of campaign ${id} is ${statuses.join(" or ")}\n`);
      else for (const jobId of r.ids) console.log(safe(jobId));
      return 0;
    });
  },
};

const list: Command = {
  summary: "campaigns, newest first",
  usage: `patchbay campaign list [--limit N] [--json]

Exit status: 0; 1 Redis unreachable; 2 usage.
  --limit N              at most N (default 50)
  --json                 an array of ids
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, limit: { type: "string" }, json: { type: "boolean" } },
  run: async ({ values, config }) => {
    const limit = numberFlag(values, "limit", { integer: true }) ?? 50;
    return withCampaigns({ values, config }, async (cc) => {
      const ids = await cc.list(limit);
      if (values.json) console.log(JSON.stringify(ids));
      else if (!ids.length) process.stderr.write(`patchbay: no campaigns in queue ${cc.c.queueName}\n`);
      else for (const id of ids) console.log(safe(id));
      return 0;
    });
  },
};

const tracker: Command = {
  summary: "track published campaigns on the queue, where the forge tokens are (runs until stopped)",
  usage: `patchbay campaign tracker

Takes the campaigns queue's track jobs (scheduled by campaign publish every 10 minutes while a
campaign has open changesets) and refreshes those campaigns from their forges. Run it on the
publishing host: it needs the same tokens as publish. Stops on SIGINT/SIGTERM.
Exit status: 0 stopped; 1 Redis unreachable; 2 usage.
${CONNECTION_USAGE}`,
  options: { ...connectionFlags },
  run: async ({ values, config }) =>
    withCampaigns({ values, config }, async (cc) => {
      const t = cc.tracker({
        onTracked: (id, r) =>
          process.stderr.write(
            `patchbay: campaign ${safe(id)}: ${r.tracked} refreshed, ${r.open} open${r.errors ? `, ${r.errors} failed` : ""}\n`,
          ),
      });
      process.stderr.write(`patchbay: tracking campaigns of queue ${cc.c.queueName}\n`);
      await new Promise<void>((res) => (process.once("SIGINT", () => res()), process.once("SIGTERM", () => res())));
      await t.close();
      return 0;
    }),
};

export const campaignCommands: Record<string, Command> = {
  "campaign run": run,
  "campaign submit": submit,
  "campaign status": status,
  "campaign publish": publish,
  "campaign track": track,
  "campaign close": close,
  "campaign retry": retry,
  "campaign list": list,
  "campaign tracker": tracker,
};
