// A certificate authority made for one test host, with openssl: a self-signed CA (ECDSA P-256,
// valid two days) and one server certificate it signs for the names and addresses given. The
// private registry (verdaccio.ts) and the HTTPS git server (git-http.ts) serve such a certificate;
// a client trusts the CA alone (the egress proxy as a credential's `ca`, git's http.sslCAInfo,
// npm's cafile), as it would an internal company CA, so nothing trusts these hosts by accident.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The files and PEM texts of a test CA and the server certificate it signed. */
export interface TestCertificate {
  /** The CA's certificate, PEM: what a client is told to trust. */
  caPem: string;
  /** The path of the CA's certificate file (inside the directory given). */
  caFile: string;
  /** The server's certificate, PEM (the leaf only: the CA signs it directly). */
  cert: string;
  /** The server's private key, PEM. */
  key: string;
  /** The paths of the server's certificate and key files. */
  certFile: string;
  keyFile: string;
}

const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
const P256 = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/**
 * Makes a CA and a server certificate for `names` (DNS names, the first also its CN) and `ips`
 * (IP addresses, so that a client on this host may connect by address and still check the
 * certificate), writing their files into `dir`, which the caller owns and removes.
 */
export function makeTestCertificate(dir: string, names: string[], ips: string[] = []): TestCertificate {
  const f = (n: string) => join(dir, n);
  openssl(
    "req",
    "-x509",
    ...P256,
    "-days",
    "2",
    "-keyout",
    f("ca-key.pem"),
    "-out",
    f("ca.pem"),
    "-subj",
    "/CN=patchbay test CA",
  );
  openssl("req", ...P256, "-keyout", f("key.pem"), "-out", f("req.csr"), "-subj", `/CN=${names[0] ?? ips[0]}`);
  const san = [...names.map((n) => `DNS:${n}`), ...ips.map((ip) => `IP:${ip}`)].join(",");
  writeFileSync(
    f("ext.cnf"),
    `subjectAltName=${san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`,
  );
  openssl(
    "x509",
    "-req",
    "-in",
    f("req.csr"),
    "-CA",
    f("ca.pem"),
    "-CAkey",
    f("ca-key.pem"),
    "-set_serial",
    "1",
    "-days",
    "2",
    "-extfile",
    f("ext.cnf"),
    "-out",
    f("cert.pem"),
  );
  const read = (n: string) => readFileSync(f(n), "utf8");
  return {
    caPem: read("ca.pem"),
    caFile: f("ca.pem"),
    cert: read("cert.pem"),
    key: read("key.pem"),
    certFile: f("cert.pem"),
    keyFile: f("key.pem"),
  };
}
