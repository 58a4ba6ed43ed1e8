// A job's CA (src/net/job-ca.ts) signs for its credential hosts and nothing else: its certificate
// is a CA for one level with Name Constraints naming only those hosts (and no IP address), a leaf
// names exactly its host for server authentication and verifies against the CA, a leaf for another
// name is refused, and a real TLS handshake that trusts only ca.pem succeeds for the host and fails
// for another name.
import { X509Certificate, createPrivateKey } from "node:crypto";
import { execFileSync } from "node:child_process";
import net from "node:net";
import tls from "node:tls";
import { beforeAll, describe, expect, it } from "vitest";
import { createJobCa, JobCaError, type JobCa } from "../../src/net/job-ca.js";

let ca: JobCa;
beforeAll(async () => {
  ca = await createJobCa(["registry.example.org", "Git.Example.ORG."]);
});

/** A TLS server on loopback with `leaf`, and a client trusting only `caPem` asking for `servername`. */
async function handshake(leaf: { key: string; cert: string }, caPem: string, servername: string) {
  const server = tls.createServer({ key: leaf.key, cert: leaf.cert }, (s) => s.end("ok"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as net.AddressInfo;
  try {
    return await new Promise<{ ok: boolean; error?: string }>((resolve) => {
      const c = tls.connect({ host: "127.0.0.1", port, servername, ca: caPem }, () => {
        c.destroy();
        resolve({ ok: true });
      });
      c.on("error", (e: NodeJS.ErrnoException) => resolve({ ok: false, error: e.code ?? e.message }));
    });
  } finally {
    server.close();
  }
}

describe("a job's CA", () => {
  it("is a CA for one level, named at random, valid from an hour ago for two days, constrained to its hosts", () => {
    const c = new X509Certificate(ca.caPem);
    expect(c.ca).toBe(true);
    expect(c.subject).toMatch(/^CN=patchbay job CA [0-9a-f]{12}$/);
    expect(c.issuer).toBe(c.subject);
    const from = Date.parse(c.validFrom);
    const to = Date.parse(c.validTo);
    expect(Date.now() - from).toBeGreaterThan(55 * 60_000);
    expect(to - Date.now()).toBeGreaterThan(47 * 3600_000);
    expect(to - Date.now()).toBeLessThanOrEqual(48 * 3600_000);
    const text = execFileSync("openssl", ["x509", "-noout", "-text"], { input: ca.caPem }).toString();
    expect(text).toMatch(/Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
    expect(text).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign/);
    expect(text).toMatch(
      /Name Constraints: critical\s+Permitted:\s+DNS:registry\.example\.org\s+DNS:git\.example\.org\s+Excluded:\s+IP:0\.0\.0\.0\/0\.0\.0\.0\s+IP:0:0:0:0:0:0:0:0\/0:0:0:0:0:0:0:0/,
    );
    expect(c.serialNumber).toMatch(/^[0-9A-F]{30,32}$/);
  });

  it("its private key is in no PEM it gives out", async () => {
    const leaf = await ca.leaf("registry.example.org");
    // The one key a leaf carries is the leaf's own: the CA's public key does not match it.
    const leafKey = createPrivateKey(leaf.key);
    const caPub = new X509Certificate(ca.caPem).publicKey;
    expect(leafKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    expect(createPrivateKey(leaf.key).export({ format: "jwk" }).x).not.toBe(caPub.export({ format: "jwk" }).x);
    expect(ca.caPem).not.toMatch(/PRIVATE KEY/);
    expect(leaf.cert).not.toMatch(/PRIVATE KEY/);
  });

  it("makes a leaf for exactly its host, for server authentication, signed by the CA; cached per host", async () => {
    const leaf = await ca.leaf("registry.example.org");
    const c = new X509Certificate(leaf.cert);
    const root = new X509Certificate(ca.caPem);
    expect(c.subjectAltName).toBe("DNS:registry.example.org");
    expect(c.ca).toBe(false);
    expect(c.issuer).toBe(root.subject);
    expect(c.checkIssued(root)).toBe(true);
    expect(c.verify(root.publicKey)).toBe(true);
    expect(c.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]);
    expect(c.checkHost("registry.example.org")).toBe("registry.example.org");
    expect(c.checkHost("other.example.org")).toBeUndefined();
    expect(await ca.leaf("REGISTRY.example.org.")).toBe(leaf);
    // The second host, given in another case with a trailing dot, is its normalized name.
    expect(new X509Certificate((await ca.leaf("git.example.org")).cert).subjectAltName).toBe("DNS:git.example.org");
  });

  it("refuses a leaf for a name not in its list, a name below one, and a CA with no hosts", async () => {
    await expect(ca.leaf("other.example.org")).rejects.toThrow(JobCaError);
    await expect(ca.leaf("a.registry.example.org")).rejects.toThrow(/only for its credential hosts/);
    await expect(ca.leaf("127.0.0.1")).rejects.toThrow(JobCaError);
    await expect(createJobCa([])).rejects.toThrow(/needs host names: none given/);
    await expect(createJobCa(["bad host"])).rejects.toThrow(/needs host names: "bad host"/);
  });

  it("a TLS client trusting only ca.pem completes the handshake for the host and not for another name", async () => {
    const leaf = await ca.leaf("registry.example.org");
    expect(await handshake(leaf, ca.caPem, "registry.example.org")).toEqual({ ok: true });
    expect(await handshake(leaf, ca.caPem, "other.example.org")).toMatchObject({
      ok: false,
      error: "ERR_TLS_CERT_ALTNAME_INVALID",
    });
    // Another job's CA is not trusted for this one's leaf.
    const other = await createJobCa(["registry.example.org"]);
    expect((await handshake(leaf, other.caPem, "registry.example.org")).ok).toBe(false);
  });
});
