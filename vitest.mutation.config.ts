// The fast, pure tests that `npm run mutation` (StrykerJS) runs against each mutant: no Docker,
// Redis or network. Not part of `npm test`'s selection logic; those files also run there.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: [
      "test/editor.test.ts",
      "test/editor-conformance-memfs.test.ts",
      "test/spec.test.ts",
      "test/agent-context.test.ts",
      "test/agent-loop.test.ts",
      "test/truncate.test.ts",
      "test/config.test.ts",
      "test/spec-fields.test.ts",
      "test/spec-messages.test.ts",
      "test/agent-context-edges.test.ts",
      "test/egress-allow.test.ts",
      "test/errors.test.ts",
      "test/attempt-outcome.test.ts",
      "test/editor-text.test.ts",
      "test/prices.test.ts",
      "test/campaign-file.test.ts",
      "test/redis-url.test.ts",
    ],
    testTimeout: 20_000,
  },
});
