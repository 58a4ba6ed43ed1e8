// What `patchbay image build` says when the base image cannot be pulled (src/sandbox/image.ts
// pullFailure): a sentence ("no registry reachable"), never the engine's raw "(HTTP code 500) …".
import { describe, expect, it } from "vitest";
import { pullFailure } from "../../../src/sandbox/image.js";

const BASE = "debian:bookworm-slim";

describe("pullFailure", () => {
  it("says no registry is reachable for the engine's network errors (Docker's wording as dockerode reports it)", () => {
    for (const raw of [
      '(HTTP code 500) server error - Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host',
      '(HTTP code 500) server error - Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)',
      '(HTTP code 500) server error - Get "https://registry-1.docker.io/v2/": dial tcp 1.2.3.4:443: connect: network is unreachable',
      "The operation was aborted",
    ]) {
      const said = pullFailure(BASE, raw);
      expect(said).toBe(`no registry reachable to pull ${BASE}`);
      expect(said).not.toMatch(/HTTP code|server error/);
    }
  });

  it("tells an image missing from its registry from an unreachable one", () => {
    const said = pullFailure(BASE, "(HTTP code 404) unexpected - manifest unknown: manifest unknown\nmore");
    expect(said).toBe(`${BASE} is not on its registry (manifest unknown: manifest unknown)`);
  });

  it("keeps any other reason, one line, bounded, without the HTTP wrapping", () => {
    const said = pullFailure(BASE, `(HTTP code 500) server error - disk full${"x".repeat(500)}\nsecond line`);
    expect(said.startsWith(`${BASE} cannot be pulled (disk full`)).toBe(true);
    expect(said).not.toContain("second line");
    expect(said.length).toBeLessThan(240);
  });
});
