// Which engine a test file runs against in the engine matrix (vitest.config.ts): "docker", or
// "podman" for the rootless Podman half. Tests whose assertion cannot hold under Podman say why in
// their names and run under Docker only.
export const ENGINE: "docker" | "podman" = process.env.PATCHBAY_TEST_ENGINE === "podman" ? "podman" : "docker";
export const podman = ENGINE === "podman";
