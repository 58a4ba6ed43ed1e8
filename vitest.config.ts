import { defineConfig } from "vitest/config";
import { podmanHost } from "./test/support/engine-kind.js";

// The engine matrix: every file against the Docker engine; the sandbox, tools, hostile-repo and job
// files again against a rootless Podman engine (started by scripts/pretest.sh through
// `scripts/services.sh --engine podman`, which writes its DOCKER_HOST here). Tests ask
// test/support/engine-kind.ts which engine they run on.
// (engine-podman runs in the Podman half only: what Podman refuses; sandbox-gvisor in Docker's only.)
const PODMAN_FILES = ["engine-podman", "sandbox-security", "sandbox-shell", "sandbox-files", "sandbox-run", "sandbox-hostile", "sandbox-reaper", "sandbox-pool", "tools-sandbox", "repo-hostile", "patch-hostile", "job"].map((f) => `test/${f}.test.ts`);

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests share the engines and one Redis on a 2-core machine.
    fileParallelism: true,
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: "docker", include: ["test/**/*.test.ts"], exclude: ["test/engine-podman.test.ts"] } },
      { extends: true, test: { name: "podman", include: PODMAN_FILES, env: { DOCKER_HOST: podmanHost(), PATCHBAY_TEST_ENGINE: "podman" } } },
    ],
  },
});
