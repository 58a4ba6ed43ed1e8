// Pure parts of setup-phase egress: allow-list entries and matching, IP literals in every form a
// resolver accepts, address classes (after resolution), the presets' config parsers, and the
// JobSpec `network` field.
import { describe, expect, it } from "vitest";
import {
  addressClass,
  cidrMatcher,
  isAllowed,
  isIpLiteral,
  normalizeHost,
  parseAllowEntry,
  PRESET_NAMES,
  refusal,
  type AllowRule,
} from "../../../src/core/allow.js";
import { aptSourceHosts, goEnvHosts, pipConfHosts, urlHost } from "../../../src/net/presets.js";
import { parseJobSpec } from "../../../src/core/spec/spec.js";

const rules = (...entries: string[]) => entries.map((e) => parseAllowEntry(e) as AllowRule);

describe("allow-list entries", () => {
  it("parses hosts, wildcards and ports, normalized", () => {
    expect(parseAllowEntry("Registry.NPMjs.org.")).toEqual({ host: "registry.npmjs.org", wildcard: false });
    expect(parseAllowEntry("*.pythonhosted.org")).toEqual({ host: "pythonhosted.org", wildcard: true });
    expect(parseAllowEntry("mirror.example.org:8443")).toEqual({
      host: "mirror.example.org",
      wildcard: false,
      port: 8443,
    });
  });
  it("refuses IP literals, URLs, bad names, open wildcards and bad ports, each with a reason", () => {
    for (const e of ["10.0.0.1", "[::1]", "::1", "2130706433", "127.1", "0x7f.1", "a.b.0x7f000001"])
      expect(parseAllowEntry(e)).toMatch(/IP addresses are not allowed/);
    expect(parseAllowEntry("https://registry.npmjs.org")).toMatch(/not a URL/);
    for (const e of ["*", "*.com", "a..b", "-a.org", "exa mple.org", "ünï.org", ""])
      expect(typeof parseAllowEntry(e)).toBe("string");
    expect(parseAllowEntry("a.org:0")).toMatch(/bad port/);
    expect(parseAllowEntry("a.org:70000")).toMatch(/bad port/);
  });
  it("matches exact names, wildcards only below their domain; without a port, 443 for CONNECT and 80 for plain HTTP only", () => {
    const r = rules("registry.npmjs.org", "*.example.org", "odd.example.net:8443");
    expect(isAllowed(r, "registry.npmjs.org", 443, "connect")).toBe(true);
    expect(isAllowed(r, "registry.npmjs.org", 80, "http")).toBe(true);
    expect(isAllowed(r, "registry.npmjs.org", 80, "connect")).toBe(false);
    expect(isAllowed(r, "registry.npmjs.org", 443, "http")).toBe(false);
    expect(isAllowed(r, "registry.npmjs.org", 22, "connect")).toBe(false);
    expect(isAllowed(r, "evil-registry.npmjs.org", 443, "connect")).toBe(false);
    expect(isAllowed(r, "registry.npmjs.org.evil.com", 443, "connect")).toBe(false);
    expect(isAllowed(r, "a.b.example.org", 443, "connect")).toBe(true);
    expect(isAllowed(r, "example.org", 443, "connect")).toBe(false);
    expect(isAllowed(r, "badexample.org", 443, "connect")).toBe(false);
    expect(isAllowed(r, "odd.example.net", 8443, "connect")).toBe(true);
    expect(isAllowed(r, "odd.example.net", 8443, "http")).toBe(true);
    expect(isAllowed(r, "odd.example.net", 443, "connect")).toBe(false);
  });
  it("normalizes host names and rejects what is not one", () => {
    expect(normalizeHost("A.B.")).toBe("a.b");
    expect(normalizeHost("a_b.org")).toBeUndefined();
    expect(normalizeHost("x".repeat(64) + ".org")).toBeUndefined();
  });
});

describe("IP literals and address classes", () => {
  it("sees IP literals in any form", () => {
    for (const h of ["1.2.3.4", "[2001:db8::1]", "::ffff:127.0.0.1", "017700000001", "0x7f000001", "127.1", "1.2.3.4."])
      expect(isIpLiteral(h)).toBe(true);
    for (const h of ["registry.npmjs.org", "localhost", "1.2.3.example"]) expect(isIpLiteral(h)).toBe(false);
  });
  it("classifies private, loopback, link-local, multicast and unspecified addresses, v4 and v6, mapped and embedded", () => {
    const cases: [string, string | undefined][] = [
      ["127.0.0.1", "loopback"],
      ["127.255.0.9", "loopback"],
      ["::1", "loopback"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"],
      ["10.1.2.3", "private"],
      ["172.16.0.1", "private"],
      ["172.31.255.255", "private"],
      ["192.168.1.1", "private"],
      ["fd00::1", "private"],
      ["169.254.169.254", "link-local"],
      ["fe80::1", "link-local"],
      ["224.0.0.251", "multicast"],
      ["ff02::1", "multicast"],
      ["0.0.0.0", "unspecified"],
      ["::", "unspecified"],
      ["100.64.0.1", "shared (CGNAT)"],
      ["255.255.255.255", "broadcast"],
      ["240.0.0.1", "reserved"],
      ["64:ff9b::a00:1", "private"],
      ["2002:7f00:1::", "loopback"],
      ["::1.2.3.4", "reserved"],
      ["fe80::1%eth0", "link-local"],
      ["172.15.255.255", undefined],
      ["fbff::1", undefined],
      ["104.16.0.1", undefined],
      ["172.32.0.1", undefined],
      ["2606:4700::1", undefined],
      ["203.0.113.80", undefined],
    ];
    for (const [ip, cls] of cases) expect([ip, addressClass(ip)]).toEqual([ip, cls]);
    expect(addressClass("example.org")).toBe("not an IP address");
  });
  it("cidrMatcher (the proxy's test-only exemption) matches its ranges only", () => {
    const m = cidrMatcher(["10.213.0.0/16"]);
    expect([m("10.213.4.2"), m("10.214.0.1"), m("::1"), m("x")]).toEqual([true, false, false, false]);
    expect(() => cidrMatcher(["10.0.0.0"])).toThrow(/not a CIDR/);
  });
});

describe("presets' configuration parsers", () => {
  it("npm's registry URL gives its host; non-http schemes give none", () => {
    expect(urlHost("https://registry.npmjs.org/\n")).toBe("registry.npmjs.org");
    expect(urlHost("http://mirror.corp:4873/npm/")).toBe("mirror.corp");
    expect(urlHost("file:///srv/npm")).toBeUndefined();
    expect(urlHost("not a url")).toBeUndefined();
  });
  it("apt sources: one-line and deb822 formats, options, comments, duplicates", () => {
    const list =
      "deb http://deb.debian.org/debian bookworm main\n# deb http://commented.example/ x\ndeb [arch=amd64 signed-by=/k.gpg] https://apt.corp.example/debian bookworm main\ndeb-src http://deb.debian.org/debian bookworm main\n";
    const sources =
      "Types: deb\nURIs: http://deb.debian.org/debian http://mirror2.example/debian\nSuites: bookworm\n\nTypes: deb\nURIs: http://security.debian.org/debian-security\n";
    expect(aptSourceHosts(list)).toEqual(["deb.debian.org", "apt.corp.example"]);
    expect(aptSourceHosts(sources)).toEqual(["deb.debian.org", "mirror2.example", "security.debian.org"]);
  });
  it("pip.conf: index-url and multi-line extra-index-url in any section", () => {
    const conf =
      "[global]\ntimeout = 60\nindex-url = https://pypi.corp.example/simple\nextra-index-url =\n    https://extra1.example/simple\n    https://extra2.example/simple\n[install]\ntrusted-host = x\n    not.a.url.example\n";
    expect(pipConfHosts(conf)).toEqual(["pypi.corp.example", "extra1.example", "extra2.example"]);
    expect(pipConfHosts("# index-url = https://no.example/\n")).toEqual([]);
  });
  it("go env: GOPROXY lists without direct/off, GOSUMDB's name or URL", () => {
    expect(goEnvHosts("https://proxy.golang.org,direct", "sum.golang.org")).toEqual([
      "proxy.golang.org",
      "sum.golang.org",
    ]);
    expect(
      goEnvHosts("https://goproxy.corp|https://b.example", "sum.golang.org+033de0ae+Ac4zctda https://sum.corp.example"),
    ).toEqual(["goproxy.corp", "b.example", "sum.corp.example"]);
    expect(goEnvHosts("off", "off")).toEqual([]);
  });
});

describe("JobSpec network", () => {
  const base = { task: "t", repo: { path: "/r" } };
  it("accepts presets, hosts and wildcards for setup", () => {
    const r = parseJobSpec({
      ...base,
      network: { setup: { allow: ["npm", "pypi", "*.example.org", "mirror.example.org:8443"] } },
    });
    expect(r.ok).toBe(true);
  });
  it("names each bad entry and unknown key", () => {
    const bad = parseJobSpec({ ...base, network: { setup: { allow: ["10.0.0.1", "npm", "*"] }, agent: true } });
    expect(bad).toEqual({
      ok: false,
      error: expect.stringContaining("network.setup.allow[0]: IP addresses are not allowed"),
    });
    expect((bad as { error: string }).error).toContain("network.setup.allow[2]");
    expect((bad as { error: string }).error).toContain("network.agent: unknown key");
    expect(parseJobSpec({ ...base, network: { setup: { alow: [] } } })).toEqual({
      ok: false,
      error: expect.stringContaining('network.setup.alow: unknown key (did you mean "allow"?)'),
    });
    expect(parseJobSpec({ ...base, network: { setup: { allow: Array(65).fill("a.org") } } }).ok).toBe(false);
  });
  it("has no way to set the proxy's test-only options", () => {
    for (const k of ["allowPrivate", "resolve"]) {
      expect(parseJobSpec({ ...base, network: { setup: { allow: [], [k]: ["10.0.0.0/8"] } } }).ok).toBe(false);
      expect(parseJobSpec({ ...base, network: { [k]: ["10.0.0.0/8"] } }).ok).toBe(false);
    }
  });
});

// The exact words and the edges: what the mutation run (npm run mutation) showed no test held.
describe("allow-list edges, exactly", () => {
  it("a name is at most 253 characters; labels are checked after a trailing dot goes", () => {
    const label = (c: string, n: number) => c.repeat(n);
    const n253 = [label("a", 63), label("b", 63), label("c", 63), label("d", 61)].join(".");
    expect(n253).toHaveLength(253);
    expect(normalizeHost(n253)).toBe(n253);
    expect(normalizeHost(n253 + "d")).toBeUndefined();
    expect(normalizeHost(".")).toBeUndefined();
    expect(normalizeHost("")).toBeUndefined();
  });

  it("IP literals: brackets, a trailing dot, anything with a colon", () => {
    expect(isIpLiteral("[1.2.3.4]")).toBe(true);
    expect(isIpLiteral("127.0.0.1.")).toBe(true);
    expect(isIpLiteral("1:2")).toBe(true);
    expect(isIpLiteral("a.b.c")).toBe(false);
    expect(isIpLiteral("x[1.2.3.4]y.org")).toBe(false);
  });

  it("entries: ports at both ends of the range, no port key without a port, the messages word for word", () => {
    expect(parseAllowEntry("a.org:1")).toStrictEqual({ host: "a.org", wildcard: false, port: 1 });
    expect(parseAllowEntry("*.A.org:65535")).toStrictEqual({ host: "a.org", wildcard: true, port: 65535 });
    expect(parseAllowEntry(" a.org ")).toStrictEqual({ host: "a.org", wildcard: false });
    expect(parseAllowEntry("a.org:65536")).toBe('bad port in "a.org:65536"');
    expect(parseAllowEntry("a.org:0")).toBe('bad port in "a.org:0"');
    expect(parseAllowEntry("HTTPS://a.org")).toBe('a host name, not a URL (got "HTTPS://a.org")');
    expect(parseAllowEntry("a..b")).toBe(`not a host name or preset (got "a..b"; presets: ${PRESET_NAMES.join(", ")})`);
    expect(PRESET_NAMES.join(", ")).toBe("npm, pypi, debian, go");
    expect(parseAllowEntry("*.com")).toBe('a wildcard needs at least two labels after "*." (got "*.com")');
    expect(parseAllowEntry("10.0.0.1")).toBe('IP addresses are not allowed, only host names (got "10.0.0.1")');
  });

  it("refusal: not named, or named on other ports (listed once each, in numeric order, per way)", () => {
    const rules = ["a.org:9000", "a.org:8443", "a.org:10000", "a.org:9000", "*.b.org"].map(
      (e) => parseAllowEntry(e) as AllowRule,
    );
    expect(refusal(rules, "c.org", 443, "connect")).toBe("not on the allow-list");
    expect(refusal([], "a.org", 443, "connect")).toBe("not on the allow-list");
    expect(refusal(rules, "a.org", 22, "connect")).toBe(
      "port 22: CONNECT only to port 443 or a port an allow-list entry names (host:port); a.org allows 8443, 9000, 10000",
    );
    expect(refusal(rules, "x.b.org", 8080, "http")).toBe(
      "port 8080: plain HTTP only to port 80 or a port an allow-list entry names (host:port); x.b.org allows 80",
    );
    expect(refusal(rules, "a.org", 10000, "connect")).toBeUndefined();
    expect(refusal(rules, "x.b.org", 80, "http")).toBeUndefined();
    expect(refusal(rules, "x.b.org", 443, "connect")).toBeUndefined();
    expect(refusal(rules, "b.org", 443, "connect")).toBe("not on the allow-list"); // *.b.org is not b.org
    expect(refusal(rules, "xb.org", 443, "connect")).toBe("not on the allow-list");
  });

  it("IPv6 forms that carry an IPv4 address are judged by it; others that look alike are not", () => {
    expect(addressClass("::ffff:127.0.0.1")).toBe("loopback");
    expect(addressClass("::FFFF:10.0.0.1")).toBe("private");
    expect(addressClass("64:ff9b::10.1.2.3")).toBe("private");
    expect(addressClass("64:FF9B::7f00:1")).toBe("loopback");
    expect(addressClass("::ffff:7f00:1")).toBe("loopback");
    expect(addressClass("2002:a00:1::")).toBe("private");
    expect(addressClass("2002:808:808::")).toBeUndefined();
    expect(addressClass("::ffff:808:808")).toBeUndefined();
    expect(addressClass("1::ffff:7f00:1")).toBeUndefined(); // not mapped: a word before the ffff
    expect(addressClass("65:ff9b::7f00:1")).toBeUndefined();
    expect(addressClass("64:ff9a::7f00:1")).toBeUndefined();
    expect(addressClass("::1.2.3.4")).toBe("reserved"); // IPv4-compatible, deprecated: reserved even when what it carries is public
    expect(addressClass("fe80:0:0:0:0:0:0:1")).toBe("link-local"); // no "::"
    expect(addressClass("2606:4700:0:0:0:0:0:1")).toBeUndefined();
    expect(addressClass("255.255.255.255")).toBe("broadcast");
    expect(addressClass("8.8.8.8")).toBeUndefined();
  });

  it("every IPv6 form that carries an IPv4 address is judged by it: NAT64 (well-known and local use), SIIT, IPv4-compatible, 6to4, mapped, Teredo", () => {
    // what each embedded address is, as the forms carry it
    const inner: [number[], string][] = [
      [[127, 0, 0, 1], "loopback"],
      [[10, 1, 2, 3], "private"],
      [[169, 254, 169, 254], "link-local"],
      [[192, 168, 7, 7], "private"],
      [[172, 16, 0, 1], "private"],
      [[100, 64, 0, 1], "shared (CGNAT)"],
      [[0, 0, 0, 0], "unspecified"],
    ];
    const hex = (a: number, b: number) => ((a << 8) | b).toString(16);
    const forms: [string, (v: number[]) => string][] = [
      ["NAT64 64:ff9b::/96", (v) => `64:ff9b::${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}`],
      ["NAT64 64:ff9b::/96, dotted", (v) => `64:ff9b::${v.join(".")}`],
      ["NAT64 local use, /96 layout", (v) => `64:ff9b:1::${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}`],
      ["NAT64 local use, /64 layout", (v) => `64:ff9b:1:0:${hex(0, v[0]!)}:${hex(v[1]!, v[2]!)}:${hex(v[3]!, 0)}:0`],
      ["NAT64 local use, /56 layout", (v) => `64:ff9b:1:${hex(0, v[0]!)}:${hex(0, v[1]!)}:${hex(v[2]!, v[3]!)}::`],
      ["NAT64 local use, /48 layout", (v) => `64:ff9b:1:${hex(v[0]!, v[1]!)}:${hex(0, v[2]!)}:${hex(v[3]!, 0)}::`],
      ["IPv4-translated (SIIT) ::ffff:0:0:0/96", (v) => `::ffff:0:${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}`],
      ["IPv4-translated, dotted", (v) => `::ffff:0:${v.join(".")}`],
      ["IPv4-compatible ::/96", (v) => `::${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}`],
      ["IPv4-compatible, dotted", (v) => `::${v.join(".")}`],
      ["IPv4-mapped ::ffff:0:0/96", (v) => `::ffff:${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}`],
      ["IPv4-mapped, uncompressed", (v) => `0:0:0:0:0:ffff:${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}`],
      ["6to4 2002::/16", (v) => `2002:${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}::1`],
      ["Teredo 2001::/32, server", (v) => `2001:0:${hex(v[0]!, v[1]!)}:${hex(v[2]!, v[3]!)}:0:0:f7f7:f7f7`], // client 8.8.8.8
      [
        "Teredo 2001::/32, client (bits inverted)",
        (v) => `2001:0:808:808:0:0:${hex(v[0]! ^ 255, v[1]! ^ 255)}:${hex(v[2]! ^ 255, v[3]! ^ 255)}`,
      ],
    ];
    for (const [form, make] of forms) {
      for (const [v4, cls] of inner) {
        if (form.startsWith("IPv4-compatible") && v4.every((x) => x === 0)) continue; // :: itself, unspecified as IPv6
        const ip = make(v4);
        const expected = cls === "unspecified" && form.startsWith("NAT64 local use") ? "NAT64 (local use)" : cls; // zeros are every layout's
        expect([form, ip, addressClass(ip)]).toEqual([form, ip, expected]);
      }
      // the same form around a public address is public; but the deprecated IPv4-compatible form, and
      // local-use NAT64, whose layout is its operator's: refused whatever it carries
      const pub = make([8, 8, 8, 8]);
      const otherwise = form.startsWith("IPv4-compatible")
        ? "reserved"
        : form.startsWith("NAT64 local use")
          ? "NAT64 (local use)"
          : undefined;
      expect([form, pub, addressClass(pub)]).toEqual([form, pub, otherwise]);
    }
    // local use: an address a /96 reading finds public but a /48 one private is named by the private one
    expect(addressClass("64:ff9b:1:a00:1:0:808:808")).toBe("private");
    expect(addressClass("64:ff9b:1::")).toBe("NAT64 (local use)");
    expect(addressClass("::1")).toBe("loopback");
    expect(addressClass("::")).toBe("unspecified");
  });

  it("cidrMatcher: both families, and a clear error for what is not a range", () => {
    const m = cidrMatcher(["10.0.0.0/8", "fd00::/8"]);
    expect([m("10.1.2.3"), m("11.0.0.1"), m("fd00::1"), m("fe00::1"), m("not-an-ip")]).toEqual([
      true,
      false,
      true,
      false,
      false,
    ]);
    expect(() => cidrMatcher(["10.0.0.0"])).toThrow("not a CIDR range: 10.0.0.0");
    expect(() => cidrMatcher(["x/8"])).toThrow("not a CIDR range: x/8");
  });
});
