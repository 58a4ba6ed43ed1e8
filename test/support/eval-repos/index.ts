// The eval's fixture repositories, in the set's order: five in Python, five in JavaScript.
import type { RepoSpec } from "../eval-sets.js";
import { csv } from "./csv.js";
import { duration } from "./duration.js";
import { leap } from "./leap.js";
import { money } from "./money.js";
import { pager } from "./pager.js";
import { quantity } from "./quantity.js";
import { range } from "./range.js";
import { roman } from "./roman.js";
import { semver } from "./semver.js";
import { slug } from "./slug.js";

/** The Python repositories (unittest). */
export const PYTHON_REPOS: RepoSpec[] = [pager, slug, roman, leap, money];
/** The JavaScript repositories (node's test runner: TAP, JUnit XML, one with an npm dependency). */
export const JS_REPOS: RepoSpec[] = [range, csv, semver, duration, quantity];
