// `PORT` or `HOST:PORT` (`[::1]:PORT` for IPv6) for --metrics-port; the host defaults to 127.0.0.1.
// Pure and dependency-free: the CLI checks the flag with it before loading anything heavy.
export function parseListen(s: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]:|([^:[\]]+):)?(\d{1,5})$/.exec(s.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || !Number.isInteger(port) || port > 65535) throw new Error(`expected PORT or HOST:PORT, got '${s}'`);
  return { host: m[1] ?? m[2] ?? "127.0.0.1", port };
}
