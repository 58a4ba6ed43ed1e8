// What a campaign's changesets are called (src/campaign/changeset.ts): one noun per kind of host,
// from one table, so that `campaign close` asks about branches, not pull requests, on plain git
// remotes, and summary.md's column says what it holds; and the ETA `campaign publish` shows in its
// progress (src/cli/campaign-command.ts), from the rate so far.
import { describe, expect, it } from "vitest";
import { CHANGE_NOUNS, changeNoun, closeQuestion, type Changeset } from "../../../src/campaign/changeset.js";
import { changesetMarkdown } from "../../../src/campaign/summary.js";
import { publishEta } from "../../../src/cli/campaign-command.js";

const on = (...forges: Changeset["forge"][]) => forges.map((forge) => ({ forge }));

describe("a changeset's noun is its host's", () => {
  it("campaign close asks about branches on plain git remotes, requests on forges", () => {
    expect(closeQuestion("c", on("git", "git"))).toBe("Delete 2 branches of campaign c?");
    expect(closeQuestion("c", on("git"))).toBe("Delete 1 branch of campaign c?");
    expect(closeQuestion("c", on("github"))).toBe("Close 1 pull request of campaign c and delete its branch?");
    expect(closeQuestion("c", on("gitlab", "gitlab"))).toBe(
      "Close 2 merge requests of campaign c and delete their branches?",
    );
    expect(closeQuestion("c", on("github", "gitlab", "git"))).toBe(
      "Close 1 pull request and 1 merge request of campaign c and delete their branches, and delete 1 branch of plain git remotes?",
    );
  });

  it("summary.md's link column is named after what it holds", () => {
    const table = (forges: Changeset["forge"][]) =>
      changesetMarkdown({
        changesets: forges.map((forge, i) => ({
          line: i + 1,
          repo: "r",
          jobId: "j",
          state: "open",
          forge,
          updatedAt: 0,
        })),
        counts: { unpublished: 0, draft: 0, open: forges.length, merged: 0, closed: 0, conflict: 0 },
        checks: { passing: 0, failing: 0, pending: 0 },
        batch: { spentUsd: 0 },
      });
    expect(table(["git"])).toContain("| review | branch | note |");
    expect(table(["github", "git"])).toContain("| review | pull request or branch | note |");
    expect(changeNoun([undefined])).toBe("changeset");
    expect(CHANGE_NOUNS.gitlab).toEqual(["merge request", "merge requests"]);
  });
});

describe("campaign publish's ETA", () => {
  it("is the time left at the rate so far", () => {
    expect(publishEta(1, 4, 1_000)).toBe("ETA 3s");
    expect(publishEta(2, 4, 90_000)).toBe("ETA 1m30s");
    expect(publishEta(0, 4, 5_000)).toBe("ETA unknown");
    expect(publishEta(4, 4, 5_000)).toBe("done");
  });
});
