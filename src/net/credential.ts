// A credential the egress proxy adds on the way out (docs/operations.md, "Private dependencies"):
// the worker's operator configures them per host (PATCHBAY_EGRESS_CREDENTIALS, parsed once in
// src/core/config/credentials.ts), a JobSpec names which its setup uses (network.setup.credentials),
// and the proxy adds the header to that host's requests only, inside TLS it terminates with a
// certificate from the job's own CA (src/net/job-ca.ts). The secret never enters the sandbox.

/** One configured credential, as the proxy uses it. Its secret fields never leave the worker. */
export interface EgressCredential {
  /** Its name, which a JobSpec's network.setup.credentials gives. */
  readonly name: string;
  /** The host it is for, normalized (lower case, no trailing dot): exactly this name, no other. */
  readonly host: string;
  /** The port it is for (443 unless configured). */
  readonly port: number;
  /** The request header it sets, in lower case (e.g. "authorization"). */
  readonly header: string;
  /** The header's whole value (e.g. "Bearer <token>"): secret. */
  readonly value: string;
  /**
   * Every form of the secret to be cut from what comes back (the value, the raw token, a Basic
   * pair's base64): an upstream that echoes the header in a body never shows it to the sandbox.
   */
  readonly secrets: readonly string[];
  /** PEM certificates the upstream's chain must end in, in place of the system's (an internal registry's CA). */
  readonly ca?: string;
}
