// Which Redis a URL names (src/redis/target.ts), how messages show it (src/redis/url.ts), what a
// connection error means (src/redis/probe.ts) and how many replicas a write waits for: pure, no Redis.
import { describe, expect, it } from "vitest";
import { keyspaceQueueName, parseRedisUrl, RedisUrlError } from "../../../src/redis/target.js";
import { shownRedisUrl } from "../../../src/redis/url.js";
import { redisErrorReason } from "../../../src/redis/probe.js";
import { tlsOptions, waitSetting } from "../../../src/redis/connect.js";

const bad = (url: string) => {
  try {
    parseRedisUrl(url);
  } catch (err) {
    expect(err).toBeInstanceOf(RedisUrlError);
    return (err as Error).message;
  }
  throw new Error(`${url} parsed`);
};

describe("parseRedisUrl", () => {
  it("reads one server, with TLS, an ACL user, a database and TLS files", () => {
    expect(parseRedisUrl("redis://127.0.0.1:6380")).toEqual({
      mode: "single",
      tls: false,
      nodes: [{ host: "127.0.0.1", port: 6380 }],
      db: 0,
      tlsFiles: {},
    });
    expect(parseRedisUrl("rediss://pb:p%40ss%3Aw@redis.internal/3?ca=/etc/ca.pem&cert=/c&key=/k")).toEqual({
      mode: "single",
      tls: true,
      nodes: [{ host: "redis.internal", port: 6379 }],
      username: "pb",
      password: "p@ss:w",
      db: 3,
      tlsFiles: { ca: "/etc/ca.pem", cert: "/c", key: "/k" },
    });
    // the default user's password, in both of the forms redis-cli and ioredis take
    expect(parseRedisUrl("redis://:secret@h:1")).toMatchObject({ password: "secret" });
    expect(parseRedisUrl("redis://secret@h:1")).toMatchObject({ password: "secret" });
    expect(parseRedisUrl("redis://[::1]:7000?db=2")).toMatchObject({ nodes: [{ host: "::1", port: 7000 }], db: 2 });
  });

  it("reads a Sentinel group's master and a Cluster's seeds", () => {
    expect(
      parseRedisUrl("redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2,10.0.0.3:26380/pbmaster/2?sentinelPassword=sp"),
    ).toEqual({
      mode: "sentinel",
      tls: false,
      masterName: "pbmaster",
      password: "pw",
      sentinelPassword: "sp",
      db: 2,
      tlsFiles: {},
      nodes: [
        { host: "10.0.0.1", port: 26379 },
        { host: "10.0.0.2", port: 26379 },
        { host: "10.0.0.3", port: 26380 },
      ],
    });
    expect(parseRedisUrl("rediss+cluster://u:p@a:7000,b:7001")).toEqual({
      mode: "cluster",
      tls: true,
      username: "u",
      password: "p",
      db: 0,
      tlsFiles: {},
      nodes: [
        { host: "a", port: 7000 },
        { host: "b", port: 7001 },
      ],
    });
  });

  it("refuses what names no Redis, saying which part and the forms, never the password", () => {
    expect(bad("http://u:secret@h:1")).toMatch(
      /^Redis URL http:\/\/u:\*\*\*@h:1: not a redis:\/\/, rediss:\/\/, redis\+sentinel:\/\/ or redis\+cluster:\/\/ URL; the forms are redis:\/\/\[USER:PASSWORD@\]HOST:PORT/,
    );
    expect(bad("redis://:secret@a:1,b:2")).toMatch(/several hosts: use redis\+sentinel:\/\/ or redis\+cluster:\/\//);
    expect(bad("redis+sentinel://a:26379")).toMatch(/no master name after the sentinels/);
    expect(bad("redis+cluster://a:1/2")).toMatch(/a Cluster has only database 0/);
    expect(bad("redis://a:99999")).toMatch(/'a:99999' is not HOST:PORT/);
    expect(bad("redis://a:1/x")).toMatch(/database 'x' is not a number/);
    expect(bad("redis://a:1?tls=1")).toMatch(
      /unknown option 'tls' \(known: ca, cert, key, password, db, sentinelPassword\)/,
    );
    expect(bad("redis://a:1?ca=/ca.pem")).toMatch(/TLS files without TLS: use rediss:\/\//);
    expect(bad("redis://a:1?sentinelPassword=x")).toMatch(/sentinelPassword without redis\+sentinel/);
    expect(bad("redis://")).toMatch(/no host/);
    expect(bad("redis://h:1?db=1&db=2")).toMatch(/'db' given twice/);
    expect(bad("redis://:pw@h:1?password=x")).toMatch(/a password both before the host and in \?password=/);
    expect(bad("redis://h:1/3?db=5")).toMatch(/a database both in the path and in \?db=/);
    for (const url of ["redis://:hunter2@a:1,b:2", "redis://u:hunter2@a:1?tls=1", "redis+sentinel://:hunter2@a:1"])
      expect(bad(url)).not.toContain("hunter2");
  });
});

describe("parseRedisUrl's edges (each pins one reading)", () => {
  it("ports, paths, databases, user parts and names, exactly", () => {
    expect(parseRedisUrl("redis://h:65535").nodes).toEqual([{ host: "h", port: 65535 }]);
    expect(bad("redis://h:65536")).toMatch(/'h:65536' is not HOST:PORT/);
    expect(bad("redis://h:0")).toMatch(/'h:0' is not HOST:PORT/);
    expect(bad("redis://h:1x")).toMatch(/'h:1x' is not HOST:PORT/);
    expect(bad("redis://!h:1")).toMatch(/'!h:1' is not HOST:PORT/);
    expect(parseRedisUrl("redis://h:1/").db).toBe(0);
    expect(parseRedisUrl("redis://h:1/12/").db).toBe(12);
    expect(bad("redis://h:1/123456")).toMatch(/database '123456' is not a number/);
    expect(bad("redis://h:1/1x")).toMatch(/database '1x' is not a number/);
    expect(bad("redis://h:1/x2")).toMatch(/database 'x2' is not a number/);
    expect(bad("redis://h:1/2/3")).toMatch(/'\/3' after the database/);
    expect(bad("redis+sentinel://h:1/m/1/x")).toMatch(/'\/x' after the master name and database/);
    expect(parseRedisUrl("redis+sentinel://h:1/my%20master").masterName).toBe("my master");
    expect(bad("redis+sentinel://h:1/%zz")).toMatch(/its master name has a bad %-escape/);
    expect(bad("redis+cluster://h:1?db=1")).toMatch(/a Cluster has only database 0: no db=/);
    expect(bad("redis://h:1?nope=1")).toMatch(/unknown option 'nope'/);
    const empty = parseRedisUrl("redis://@h:1");
    expect([empty.username, empty.password]).toEqual([undefined, undefined]);
    const noUser = parseRedisUrl("redis://:pw@h:1");
    expect([noUser.username, noUser.password]).toEqual([undefined, "pw"]);
    const emptyPw = parseRedisUrl("redis://u:@h:1");
    expect([emptyPw.username, emptyPw.password]).toEqual(["u", ""]);
    expect(parseRedisUrl("redis://u:p%41@h:1").password).toBe("pA");
    expect(parseRedisUrl("redis://us%65r:p@h:1").username).toBe("user");
    expect(keyspaceQueueName("x{ab}", { mode: "cluster" })).toBe("x{ab}");
    expect(keyspaceQueueName("x{}", { mode: "cluster" })).toBe("{x{}}");
  });
});

describe("shownRedisUrl", () => {
  it("puts *** for every password, in the user part and the query, in every form", () => {
    expect(shownRedisUrl("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
    expect(shownRedisUrl("redis://pb:s3cr@t@h:1/0")).toBe("redis://pb:***@h:1/0");
    expect(shownRedisUrl("redis://s3cret@h:1")).toBe("redis://:***@h:1");
    expect(shownRedisUrl("redis+sentinel://:pw@a:1,b:2/m?sentinelPassword=sp&db=1")).toBe(
      "redis+sentinel://:***@a:1,b:2/m?sentinelPassword=***&db=1",
    );
    expect(shownRedisUrl("rediss+cluster://u:pw@a:1,b:2?password=x")).toBe(
      "rediss+cluster://u:***@a:1,b:2?password=***",
    );
    // only values of secret keys, and only with a value
    expect(shownRedisUrl("redis://h:1?db=password&ca=/x")).toBe("redis://h:1?db=password&ca=/x");
    expect(shownRedisUrl("redis://h:1?password&db=1")).toBe("redis://h:1?password&db=1");
    expect(shownRedisUrl("u:pw@host")).toBe("u:***@host");
    expect(shownRedisUrl("redis://h:1/0")).toBe("redis://h:1/0");
  });

  it("holds for the red team's passwords: a ? or # in them, %-encoded or unknown keys, uppercase", () => {
    // a ? in the password: the user part ends at the last @ (the parser splits the same way)
    expect(shownRedisUrl("redis://u:pa?ss@host:6379")).toBe("redis://u:***@host:6379");
    expect(shownRedisUrl("redis://:s3cr?t@h:1/0")).toBe("redis://:***@h:1/0");
    expect(parseRedisUrl("redis://u:pa?ss@host:6379")).toMatchObject({
      username: "u",
      password: "pa?ss",
      nodes: [{ host: "host", port: 6379 }],
    });
    expect(shownRedisUrl("redis://u:p@ss?word@host")).toBe("redis://u:***@host");
    // a # is part of a query value, as URLSearchParams reads it
    expect(shownRedisUrl("redis://127.0.0.1:6379?password=a#bcdSECRETTAIL")).toBe(
      "redis://127.0.0.1:6379?password=***",
    );
    expect(parseRedisUrl("redis://h:1?password=a#b").password).toBe("a#b");
    // keys as Redis' parser decodes them, and keys patchbay does not know
    expect(shownRedisUrl("redis://h:1?%70assword=SECRET8&db=1")).toBe("redis://h:1?%70assword=***&db=1");
    expect(shownRedisUrl("redis://h:1?sentinel_password=X&PASSWORD=Y&pass=Z")).toBe(
      "redis://h:1?sentinel_password=***&PASSWORD=***&pass=***",
    );
    for (const url of [
      "redis://u:pa?ss@host:6379",
      "redis://:s3cr?t@h:x",
      "redis://h:1?pass=hunter2",
      "redis://h:1?password=hunter2&password=x",
    ]) {
      try {
        parseRedisUrl(url);
      } catch (err) {
        expect((err as Error).message).not.toMatch(/hunter2|pa\?ss|s3cr/);
      }
    }
  });
});

describe("a connection's error, said so a person can act on it", () => {
  const t = parseRedisUrl("rediss://pb:x@h:1");
  it("names credentials, TLS trust, a plain port and a missing client certificate as configuration", () => {
    expect(redisErrorReason(new Error("WRONGPASS invalid username-password pair or user is disabled."), t)).toEqual([
      "config",
      expect.stringMatching(/^Redis refused the password of user 'pb': set the right one in REDIS_URL/),
    ]);
    expect(redisErrorReason(new Error("NOAUTH Authentication required."), t)[1]).toMatch(/Redis wants a password/);
    expect(
      redisErrorReason(
        Object.assign(new Error("self-signed certificate in certificate chain"), { code: "SELF_SIGNED_CERT_IN_CHAIN" }),
        t,
      ),
    ).toEqual([
      "config",
      expect.stringMatching(/not trusted \(SELF_SIGNED_CERT_IN_CHAIN\): set PATCHBAY_REDIS_TLS_CA/),
    ]);
    expect(redisErrorReason(new Error("error:0A00010B:SSL routines::wrong version number"), t)[1]).toMatch(
      /does not speak TLS/,
    );
    expect(redisErrorReason(new Error("ssl3_read_bytes:tlsv13 alert certificate required"), t)[1]).toMatch(
      /asks for a client certificate/,
    );
    expect(
      redisErrorReason(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }), t),
    ).toEqual(["infra", "connect ECONNREFUSED 127.0.0.1:1"]);
  });
});

describe("what a write that matters waits for, and a Cluster's queue name", () => {
  it("waits for 1 replica behind Sentinel by default, none elsewhere, and never on a Cluster (asking for it there is refused)", () => {
    const auto = { replicas: "auto" as const, timeoutMs: 2000 };
    expect(waitSetting(auto, { mode: "sentinel" })).toEqual({ replicas: 1, timeoutMs: 2000 });
    expect(waitSetting(auto, { mode: "single" })).toEqual({ replicas: 0, timeoutMs: 2000 });
    expect(waitSetting({ replicas: 2, timeoutMs: 5 }, { mode: "single" })).toEqual({ replicas: 2, timeoutMs: 5 });
    expect(waitSetting({ replicas: 0, timeoutMs: 5 }, { mode: "cluster" })).toEqual({ replicas: 0, timeoutMs: 5 });
    expect(() => waitSetting({ replicas: 1, timeoutMs: 5 }, { mode: "cluster" })).toThrow(
      /PATCHBAY_REDIS_WAIT_REPLICAS=1 cannot work on a Redis Cluster .*: set it to auto or 0/,
    );
  });

  it("refuses TLS files for a URL without TLS (the connection would go in clear), and WAIT's 0 (for ever)", () => {
    expect(() => tlsOptions(parseRedisUrl("redis://h:1"), { ca: "/ca.pem", key: "/k" })).toThrow(
      "PATCHBAY_REDIS_TLS_CA, PATCHBAY_REDIS_TLS_KEY are set but the Redis URL is not rediss://: use rediss:// (or unset them)",
    );
    expect(tlsOptions(parseRedisUrl("redis://h:1"), {})).toBeUndefined();
    expect(waitSetting({ replicas: 1, timeoutMs: 0 }, { mode: "single" }).timeoutMs).toBe(1);
  });

  it("hash-tags the queue's name on a Cluster only, keeping a tag already there", () => {
    expect(keyspaceQueueName("fix", { mode: "cluster" })).toBe("{fix}");
    expect(keyspaceQueueName("a{b}c", { mode: "cluster" })).toBe("a{b}c");
    expect(keyspaceQueueName("fix", { mode: "sentinel" })).toBe("fix");
  });
});
