// An HTTPS test host on a loopback address of its own (127.214.N.M, so that ports 443 and 8443
// are free for it), with one self-signed certificate for several names, as one CDN address serves
// many sites. It answers every request (but /hang) with the server name its TLS connection carried and the
// Host header, and counts TCP connections, so a test can tell what reached it and what did not.
// Port 9443 accepts P-256 key shares only: a client that sends X25519 first gets a
// HelloRetryRequest there.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";

export const TLS_PORTS = { plain: 443, alt: 8443, retry: 9443 } as const;

export interface TlsHost {
  ip: string;
  /** The certificate (self-signed: it is its own CA), PEM. */
  ca: string;
  /** TCP connections accepted, per port. */
  connections: Record<number, number>;
  /** The server name of each completed handshake ("" for none). */
  names: string[];
  close(): Promise<void>;
}

export async function startTlsHost(index: number, names: string[]): Promise<TlsHost> {
  const ip = `127.214.${process.pid % 250}.${index + 1}`;
  const dir = mkdtempSync(join(tmpdir(), "pb-tls-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
        "-subj",
        `/CN=${names[0]}`,
        "-addext",
        `subjectAltName=${names.map((n) => `DNS:${n}`).join(",")}`,
      ],
      { stdio: "ignore" },
    );
    const [key, cert] = [readFileSync(join(dir, "key.pem"), "utf8"), readFileSync(join(dir, "cert.pem"), "utf8")];
    const host: TlsHost = { ip, ca: cert, connections: {}, names: [], close: async () => {} };
    const servers = await Promise.all(
      Object.values(TLS_PORTS).map(async (port) => {
        const server = https.createServer(
          { key, cert, ...(port === TLS_PORTS.retry ? { ecdhCurve: "P-256" } : {}) },
          (req, res) => {
            if (req.url === "/hang") return; // never answers
            const sni = (req.socket as TLSSocket).servername || "-";
            const body = `tls ${port} sni=${sni} host=${req.headers.host ?? "-"}`;
            res
              .writeHead(200, {
                "content-type": "text/plain",
                "content-length": Buffer.byteLength(body),
                connection: "close",
              })
              .end(body);
          },
        );
        host.connections[port] = 0;
        server.on("connection", () => host.connections[port]!++);
        server.on("secureConnection", (s: TLSSocket) => host.names.push(s.servername || ""));
        server.on("tlsClientError", () => {});
        await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, ip, () => resolve()));
        if ((server.address() as AddressInfo).port !== port) throw new Error("tls host: wrong port");
        return server;
      }),
    );
    host.close = async () => {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((r) => {
              s.closeAllConnections();
              s.close(() => r());
            }),
        ),
      );
    };
    return host;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
