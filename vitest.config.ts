import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests share one Docker engine and one Redis on a 2-core machine.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
