// A credential's secrets never come back to the sandbox (src/net/scrub.ts): every occurrence of
// any secret becomes as many '*' as it has bytes, in a header and in a body streamed in chunks of
// any size, a secret split over 2..n chunks, overlapping occurrences and secrets that share a
// prefix included; the length never changes; bytes that only begin a secret pass unchanged. An
// echo in a usual encoding (percent-encoded, JSON-escaped, `\/`) and a non-ASCII secret echoed
// as the Latin-1 bytes Node sent it in are cut too (red team of issue 46).
import { describe, expect, it } from "vitest";
import { ScrubStream, scrubBytes, scrubHeader, secretForms } from "../../../src/net/scrub.js";

/** Runs `chunks` through a ScrubStream and returns what came out, joined. */
async function stream(secrets: string[], chunks: string[]): Promise<string> {
  const s = new ScrubStream(secrets);
  const out: Buffer[] = [];
  s.on("data", (c: Buffer) => out.push(c));
  const done = new Promise((r) => s.on("end", r));
  for (const c of chunks) s.write(Buffer.from(c));
  s.end();
  await done;
  return Buffer.concat(out).toString();
}

/** Every way to cut `text` into pieces of `size` bytes. */
const pieces = (text: string, size: number) => text.match(new RegExp(`[^]{1,${size}}`, "g")) ?? [];

describe("scrub", () => {
  const TOKEN = "npm_s3cr3tT0k3n";
  const body = `{"error":"bad token Bearer ${TOKEN}","again":"${TOKEN}"}`;
  const want = body.replaceAll(TOKEN, "*".repeat(TOKEN.length));

  it("replaces every occurrence in one buffer, keeping the length", () => {
    const out = scrubBytes(Buffer.from(body), [TOKEN]).toString();
    expect(out).toBe(want);
    expect(out.length).toBe(body.length);
  });

  it("finds a secret split over 2..n chunks, at every chunk size", async () => {
    for (let size = 1; size <= body.length; size++) expect(await stream([TOKEN], pieces(body, size))).toBe(want);
  });

  it("covers overlapping occurrences and secrets that share a prefix", async () => {
    expect(scrubBytes(Buffer.from("xaaay"), ["aa"]).toString()).toBe("x***y");
    expect(scrubBytes(Buffer.from("abababx"), ["abab"]).toString()).toBe("******x");
    for (let size = 1; size <= 7; size++) {
      expect(await stream(["aa"], pieces("xaaay", size))).toBe("x***y");
      expect(await stream(["abab"], pieces("abababx", size))).toBe("******x");
      expect(await stream(["abc", "abd"], pieces("abcabdabe", size))).toBe("******abe");
    }
  });

  it("covers several secrets of several lengths: the value, the token, a Basic pair's base64", async () => {
    const basic = Buffer.from(`user:${TOKEN}`).toString("base64");
    const secrets = [`Bearer ${TOKEN}`, TOKEN, basic];
    const text = `a Bearer ${TOKEN} b ${basic} c ${TOKEN.slice(0, 5)} d`;
    const expected = `a ${"*".repeat(7 + TOKEN.length)} b ${"*".repeat(basic.length)} c ${TOKEN.slice(0, 5)} d`;
    for (let size = 1; size <= text.length; size += 3) expect(await stream(secrets, pieces(text, size))).toBe(expected);
  });

  it("passes a prefix of a secret at the very end, and text with no secret, unchanged", async () => {
    expect(await stream([TOKEN], ["hello ", TOKEN.slice(0, -1)])).toBe(`hello ${TOKEN.slice(0, -1)}`);
    expect(await stream([TOKEN], ["plain", " text"])).toBe("plain text");
    expect(await stream([], ["no", " secrets"])).toBe("no secrets");
    expect(await stream([""], ["empty", " secret"])).toBe("empty secret");
  });

  it("scrubs a header's value read as latin1, a non-ASCII secret included", () => {
    expect(scrubHeader(`Bearer realm="x", token=${TOKEN}`, [TOKEN])).toBe(
      `Bearer realm="x", token=${"*".repeat(TOKEN.length)}`,
    );
    const wire = Buffer.from("k=pässwörd;").toString("latin1");
    expect(scrubHeader(wire, ["pässwörd"])).toBe(`k=${"*".repeat(Buffer.byteLength("pässwörd"))};`);
  });

  it("cuts a secret echoed percent-encoded, JSON-escaped or with `\\/` (a Basic pair's +, / and =)", async () => {
    const pair = "dXNlcjpwYXNz/w+rd==";
    const text = `loc=/x?a=${encodeURIComponent(`Basic ${pair}`)} j="${JSON.stringify(pair).slice(1, -1).replaceAll("/", "\\/")}" q=${encodeURIComponent(pair)}`;
    const out = await stream([`Basic ${pair}`, pair], pieces(text, 5));
    expect(out).not.toMatch(/dXNlcjpwYXNz/);
    expect(out.length).toBe(text.length);
    expect(secretForms("a/b+c")).toEqual(["a/b+c", "a%2Fb%2Bc", "a\\/b+c"]);
    expect(secretForms("pä/ss")).toContain("p\\u00e4/ss");
    const py = `{"key": "${JSON.stringify("pässwörd-1")
      .slice(1, -1)
      .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}"}`;
    expect(await stream(["pässwörd-1"], pieces(py, 3))).not.toMatch(/p\\u00e4ssw/);
  });

  it("cuts a non-ASCII secret echoed as the Latin-1 bytes a header carries it in, in a body and a header", async () => {
    const secret = "pässwörd-1";
    const wire = Buffer.concat([Buffer.from("x "), Buffer.from(secret, "latin1"), Buffer.from(" y")]);
    const s = new ScrubStream([secret]);
    const out: Buffer[] = [];
    s.on("data", (c: Buffer) => out.push(c));
    const done = new Promise((r) => s.on("end", r));
    s.end(wire);
    await done;
    expect(Buffer.concat(out).toString("latin1")).toBe(`x ${"*".repeat(secret.length)} y`);
    expect(scrubHeader(wire.toString("latin1"), [secret])).toBe(`x ${"*".repeat(secret.length)} y`);
  });

  it("cuts a secret whatever the case of its letters (an echo lower- or upper-cased)", async () => {
    const text = `a ${TOKEN.toLowerCase()} b ${TOKEN.toUpperCase()} c`;
    const want2 = `a ${"*".repeat(TOKEN.length)} b ${"*".repeat(TOKEN.length)} c`;
    for (let size = 1; size <= text.length; size += 4) expect(await stream([TOKEN], pieces(text, size))).toBe(want2);
    expect(scrubHeader(`x-${TOKEN.toLowerCase()}`, [TOKEN])).toBe(`x-${"*".repeat(TOKEN.length)}`);
  });
});
