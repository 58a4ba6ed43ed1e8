import { readFileSync } from "node:fs";
import { defineConfig } from "vitest/config";

// The engine matrix: every file against the Docker engine; the sandbox, tools, hostile-repo and job
// files again against a rootless Podman engine (started by scripts/pretest.sh through
// `scripts/services.sh --engine podman`, which writes its DOCKER_HOST here). Tests ask
// test/support/engine-kind.ts which engine they run on.
const PODMAN_FILES = ["sandbox-security", "sandbox-shell", "sandbox-files", "sandbox-run", "sandbox-hostile", "sandbox-reaper", "sandbox-pool", "tools-sandbox", "repo-hostile", "patch-hostile", "job"].map((f) => `test/${f}.test.ts`);

function podmanHost(): string {
  const file = `${process.env.PATCHBAY_STATE_DIR ?? "/var/tmp/patchbay"}/podman.env`;
  try {
    return /^DOCKER_HOST=(\S+)/m.exec(readFileSync(file, "utf8"))![1]!;
  } catch {
    // No engine: the Podman half fails, naming what to run (never skipped).
    return `unix:///nonexistent/no-podman-engine-run-npm-run-services--engine-podman.sock`;
  }
}

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests share the engines and one Redis on a 2-core machine.
    fileParallelism: true,
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: "docker", include: ["test/**/*.test.ts"] } },
      { extends: true, test: { name: "podman", include: PODMAN_FILES, env: { DOCKER_HOST: podmanHost(), PATCHBAY_TEST_ENGINE: "podman" } } },
    ],
  },
});
