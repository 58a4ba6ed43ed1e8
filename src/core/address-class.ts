// Whether an address is a public one, for the egress proxy (src/net/proxy.ts checks every address a
// name resolves to with addressClass before it connects, to exactly that address). Pure.
//
// Address classes that are never a public service: the host's own, its private networks, link-local
// (cloud metadata at 169.254.169.254), multicast, unspecified. Documentation and benchmarking
// ranges are not listed: egress gateways use them (registry.npmjs.org resolves to 203.0.113.80 on
// the machine these tests run on). Checked after resolution, on the very address the proxy then
// connects to, so a name that resolves differently on a second lookup (DNS rebinding) gains nothing.
//
// An IPv6 address that carries an IPv4 address is judged by the IPv4 address it carries: a
// translator, tunnel or dual stack on the way delivers it there, so `64:ff9b::7f00:1` is the
// host's loopback and `2002:a9fe:a9fe::` the metadata service. Every such form is listed in
// EMBEDDINGS. Teredo carries two (a server and a client): public only if both are. Local-use NAT64
// carries one where its operator chose (RFC 6052's layouts), which cannot be known here: every
// such address is refused, named by the class one of its layouts reads when one reads a non-public
// address, else as "NAT64 (local use)".
import { isIP } from "node:net";

const CLASSES: [string, "ipv4" | "ipv6", string, number][] = [
  ["unspecified", "ipv4", "0.0.0.0", 8],
  ["private", "ipv4", "10.0.0.0", 8],
  ["shared (CGNAT)", "ipv4", "100.64.0.0", 10],
  ["loopback", "ipv4", "127.0.0.0", 8],
  ["link-local", "ipv4", "169.254.0.0", 16],
  ["private", "ipv4", "172.16.0.0", 12],
  ["private", "ipv4", "192.168.0.0", 16],
  ["multicast", "ipv4", "224.0.0.0", 4],
  ["reserved", "ipv4", "240.0.0.0", 4],
  ["unspecified", "ipv6", "::", 128],
  ["loopback", "ipv6", "::1", 128],
  ["private", "ipv6", "fc00::", 7],
  ["link-local", "ipv6", "fe80::", 10],
  ["site-local", "ipv6", "fec0::", 10],
  ["multicast", "ipv6", "ff00::", 8],
];

/** Sixteen bytes of an IPv6 address (a trailing dotted quad and a zone id allowed), or undefined. */
export function v6Bytes(ip: string): number[] | undefined {
  if (isIP(ip) !== 6) return undefined;
  let text = ip.replace(/%.*$/, "");
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const parse = (s: string) => (s ? s.split(":").map((w) => parseInt(w, 16)) : []);
  const a = parse(head);
  const b = tail === undefined ? [] : parse(tail);
  const words = [...a, ...Array<number>(8 - a.length - b.length).fill(0), ...b];
  return words.flatMap((w) => [w >> 8, w & 255]);
}

const v4Bytes = (ip: string) => ip.split(".").map(Number);
// Plain arithmetic rather than net.BlockList: it runs once per proxied connection, and BlockList
// builds a SocketAddress per range and call (~0.5 ms per check under load).
const RANGES = CLASSES.map(([name, family, net, prefix]) => ({
  name,
  family,
  bytes: family === "ipv4" ? v4Bytes(net) : v6Bytes(net)!,
  prefix,
}));

/** Whether the first `prefix` bits of two byte arrays agree. */
function samePrefix(a: readonly number[], b: readonly number[], prefix: number): boolean {
  for (let i = 0, left = prefix; left > 0; i++, left -= 8) {
    const shift = 8 - Math.min(8, left);
    if (a[i]! >> shift !== b[i]! >> shift) return false;
  }
  return true;
}

const rangeClass = (bytes: readonly number[], family: "ipv4" | "ipv6") =>
  RANGES.find((r) => r.family === family && samePrefix(bytes, r.bytes, r.prefix))?.name;

function v4Class(b: readonly number[]): string | undefined {
  if (b.every((x) => x === 255)) return "broadcast";
  return rangeClass(b, "ipv4");
}

const zero = (b: readonly number[], from: number, to: number) => b.slice(from, to).every((x) => x === 0);
const at = (b: readonly number[], ...i: number[]) => i.map((k) => b[k]!);

/**
 * The IPv6 forms that carry an IPv4 address, each with where it carries it (one or more places,
 * byte offsets into the sixteen). `otherwise`: the class of an address of the form whose embedded
 * addresses are all public: "reserved" for IPv4-compatible ones (no longer forwarded: RFC 4291
 * 2.5.5.1), a class of its own for local-use NAT64 (see above). `layouts`: the places are other
 * readings of one embedded address, not several addresses (Teredo's).
 */
const EMBEDDINGS: {
  name: string;
  is: (b: readonly number[]) => boolean;
  v4: (b: readonly number[]) => number[][];
  otherwise?: string;
  layouts?: true;
}[] = [
  // ::ffff:0:0/96, IPv4-mapped (RFC 4291): a dual-stack socket connects to the IPv4 address itself.
  {
    name: "IPv4-mapped",
    is: (b) => zero(b, 0, 10) && b[10] === 255 && b[11] === 255,
    v4: (b) => [at(b, 12, 13, 14, 15)],
  },
  // ::ffff:0:0:0/96, IPv4-translated (SIIT, RFC 2765).
  {
    name: "IPv4-translated",
    is: (b) => zero(b, 0, 8) && b[8] === 255 && b[9] === 255 && zero(b, 10, 12),
    v4: (b) => [at(b, 12, 13, 14, 15)],
  },
  // ::/96, IPv4-compatible (deprecated); :: and ::1 are judged as IPv6 before this.
  { name: "IPv4-compatible", is: (b) => zero(b, 0, 12), v4: (b) => [at(b, 12, 13, 14, 15)], otherwise: "reserved" },
  // 64:ff9b::/96, NAT64's well-known prefix (RFC 6052): always the /96 layout.
  {
    name: "NAT64",
    is: (b) => b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(b, 4, 12),
    v4: (b) => [at(b, 12, 13, 14, 15)],
  },
  // 64:ff9b:1::/48, NAT64 local use (RFC 8215): its operator picks a prefix of /48 to /96, so it
  // is read in every RFC 6052 layout that fits (/96, /64, /56, /48; bits 64-71 skipped).
  {
    name: "NAT64 (local use)",
    is: (b) => b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && b[4] === 0 && b[5] === 1,
    v4: (b) => [at(b, 12, 13, 14, 15), at(b, 9, 10, 11, 12), at(b, 7, 9, 10, 11), at(b, 6, 7, 9, 10)],
    otherwise: "NAT64 (local use)",
    layouts: true,
  },
  // 2002::/16, 6to4 (RFC 3056): the relay's IPv4 address in bits 16-47.
  { name: "6to4", is: (b) => b[0] === 0x20 && b[1] === 0x02, v4: (b) => [at(b, 2, 3, 4, 5)] },
  // 2001::/32, Teredo (RFC 4380): the server in bits 32-63, the client (each bit inverted) in the last 32.
  {
    name: "Teredo",
    is: (b) => b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0,
    v4: (b) => [at(b, 4, 5, 6, 7), at(b, 12, 13, 14, 15).map((x) => x ^ 255)],
  },
];

function ipv6Class(bytes: readonly number[]): string | undefined {
  const own = rangeClass(bytes, "ipv6");
  if (own) return own;
  const form = EMBEDDINGS.find((e) => e.is(bytes));
  if (!form) return undefined;
  const classes = form
    .v4(bytes)
    .map(v4Class)
    .filter((c) => c !== undefined);
  if (!form.layouts) return classes[0] ?? form.otherwise;
  // Layouts of one address: another layout's bytes read 0.0.0.0 or 240/4 where this one reads a
  // private address, so the private one names it; none of them: the form's own class.
  return classes.find((c) => c !== "unspecified" && c !== "reserved") ?? form.otherwise;
}

/** Why an address is not a public one ("loopback", "private", …), or undefined for a public address. */
export function addressClass(ip: string): string | undefined {
  const family = isIP(ip);
  if (family === 0) return "not an IP address";
  if (family === 4) return v4Class(v4Bytes(ip));
  return ipv6Class(v6Bytes(ip)!);
}
