// npm run soak [-- --jobs N --turns N --workers N --kills N --terms N --redis N --engine N --seed N]
// The longer chaos soak (test/support/soak.ts): prints the chaos as it happens and one summary
// line; exits 1 unless every job completed exactly once, nothing leaked and no worker was wedged.
import { parseArgs } from "node:util";
import { soak } from "../test/support/soak.js";

const { values: v } = parseArgs({
  options: {
    jobs: { type: "string", default: "40" },
    turns: { type: "string", default: "16" },
    workers: { type: "string", default: "4" },
    kills: { type: "string", default: "12" },
    terms: { type: "string", default: "4" },
    redis: { type: "string", default: "2" },
    engine: { type: "string", default: "2" },
    seed: { type: "string" },
  },
});
const n = (s: string | undefined) => Number(s);
const r = await soak({
  jobs: n(v.jobs),
  turns: n(v.turns),
  workers: n(v.workers),
  kills: n(v.kills),
  terms: n(v.terms),
  redisRestarts: n(v.redis),
  engineRestarts: n(v.engine),
  ...(v.seed ? { seed: n(v.seed) } : {}),
  log: (l) => console.log(l),
});
const ok = r.statuses.completed === r.jobs && !r.notOnce.length && !r.leftovers && !r.wedged.length;
console.log(
  ok
    ? "soak: PASS"
    : `soak: FAIL ${JSON.stringify({ statuses: r.statuses, notOnce: r.notOnce, leftovers: r.leftovers, wedged: r.wedged })}`,
);
process.exit(ok ? 0 : 1);
