// What each host does for git itself, with or without its API client: the user its token goes
// with, and GitLab's push options that open a merge request. Apart from the API clients
// (github.ts, gitlab.ts), whose packages are optional and load only when a campaign calls the API.
import type { ForgeGit } from "./forge.js";

/** The prefix that makes a GitLab merge request's title a draft's. */
export const DRAFT = "Draft: ";

/** GitHub takes a token over git's http(s) as the password of the user `x-access-token`; a push makes a branch only. */
export const githubGit: ForgeGit = { tokenUser: "x-access-token" };

/**
 * GitLab takes a token over git's http(s) as the password of the user `oauth2`. Without a token,
 * the push itself opens the merge request (`git push -o merge_request.create`), a draft by the
 * same title prefix the API's create uses; each option is one line, as git requires.
 */
export const gitlabGit: ForgeGit = {
  tokenUser: "oauth2",
  pushOptions(pr) {
    const oneLine = (s: string) => s.replace(/[\r\n\0]+/g, " ").slice(0, 250);
    return [
      "merge_request.create",
      `merge_request.target=${oneLine(pr.base)}`,
      `merge_request.title=${oneLine(pr.draft ? `${DRAFT}${pr.title}` : pr.title)}`,
    ];
  },
};
