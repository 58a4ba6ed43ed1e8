// Which engine a test file runs against in the engine matrix (vitest.config.ts): "docker", or
// "podman" for the rootless Podman half. Tests whose assertion cannot hold under Podman say why in
// their names and run under Docker only. Also where that Podman is (the bench's engines row too).
import { readFileSync } from "node:fs";

export const ENGINE: "docker" | "podman" = process.env.PATCHBAY_TEST_ENGINE === "podman" ? "podman" : "docker";
export const podman = ENGINE === "podman";

/**
 * The rootless Podman's DOCKER_HOST, as `scripts/services.sh --engine podman` wrote it. Without it,
 * an address that fails naming what to run: the Podman half is never skipped.
 */
export function podmanHost(env: NodeJS.ProcessEnv = process.env): string {
  const file = `${env.PATCHBAY_STATE_DIR ?? "/var/tmp/patchbay"}/podman.env`;
  try {
    return /^DOCKER_HOST=(\S+)/m.exec(readFileSync(file, "utf8"))![1]!;
  } catch {
    return "unix:///nonexistent/no-podman-engine-run-npm-run-services--engine-podman.sock";
  }
}
