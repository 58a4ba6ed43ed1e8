// A credential the egress proxy adds on the way out (docs/operations.md, "Private dependencies"):
// the worker's operator configures them per host (PATCHBAY_EGRESS_CREDENTIALS, parsed once in
// src/core/config/credentials.ts), a JobSpec names which its setup uses (network.setup.credentials),
// and the proxy adds the header to that host's requests only, inside TLS it terminates with a
// certificate from the job's own CA (src/net/job-ca.ts). The secret never enters the sandbox.
// The shape is declared beside its parser in src/core/config, the layer every other one may import.

export type { EgressCredential } from "../core/config/credentials.js";
