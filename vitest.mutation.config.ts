// The tests that `npm run mutation` (StrykerJS) runs against each mutant: test/unit/pure/, the pure
// tests (functions and objects in memory: no process, server, sandbox or service). Not part of
// `npm test`'s selection; those files run there too (the unit tier).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/unit/pure/**/*.test.ts"],
    testTimeout: 20_000,
  },
});
