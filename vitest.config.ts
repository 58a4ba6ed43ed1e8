import { defineConfig } from "vitest/config";
import { podmanHost } from "./test/support/engine-kind.js";

// The test tiers are folders, and each folder is a project (test/README.md says what each needs):
// - unit: test/unit/, no Docker, Redis or network (the pure tests in test/unit/pure/, the local and
//   memory backends); `npm run test:unit`.
// - integration: test/integration/ (and any test file outside the three tiers' folders, so none is
//   left out of `npm test`), against the Docker engine, Redis and the other real services.
// - e2e: test/e2e/, the whole product from outside: the CLI, worker processes, compose.
// - podman: the engine matrix's second engine. The files in test/integration/engines/ (the sandbox,
//   tools, hostile-repo, patch and job files) run again, with the same assertions, against a rootless
//   Podman (started by scripts/pretest.sh through `scripts/services.sh --engine podman`, which writes
//   its DOCKER_HOST where podmanHost() reads it). Tests ask test/support/engine-kind.ts which engine
//   they run on. A file named *-podman.test.ts runs in this half only (what Podman refuses);
//   sandbox-gvisor.test.ts lies outside engines/, so it runs against Docker only.
const PODMAN_ONLY = "test/**/*-podman.test.ts";

export default defineConfig({
  test: {
    // running-files: a file that never ends is named (and the run ended) instead of running to CI's limit.
    reporters: ["default", "./test/support/running-files-reporter.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests share the engines and one Redis on a 2-core machine.
    fileParallelism: true,
    maxWorkers: 2,
    projects: [
      // The pure tests share a process per worker (they hold no state between files), which halves their cost.
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"], exclude: ["test/unit/pure/**"] } },
      { extends: true, test: { name: "unit-pure", include: ["test/unit/pure/**/*.test.ts"], isolate: false } },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          exclude: ["test/unit/**", "test/e2e/**", PODMAN_ONLY],
        },
      },
      { extends: true, test: { name: "e2e", include: ["test/e2e/**/*.test.ts"] } },
      {
        extends: true,
        test: {
          name: "podman",
          include: ["test/integration/engines/**/*.test.ts"],
          env: { DOCKER_HOST: podmanHost(), PATCHBAY_TEST_ENGINE: "podman" },
        },
      },
    ],
  },
});
