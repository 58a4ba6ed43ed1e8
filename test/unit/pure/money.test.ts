// The one money formatter (src/core/money.ts): enough digits to be true, never "$0.00" for an amount
// that is not zero; and a real message that shows a small budget (the batch's budget note).
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { runInNewContext } from "node:vm";
import { usd } from "../../../src/core/money.js";

describe("usd", () => {
  it("shows cents from $1 up", () => {
    expect(usd(1)).toBe("$1.00");
    expect(usd(12.345)).toBe("$12.35");
    expect(usd(1234.5)).toBe("$1234.50");
  });

  it("shows two significant digits below $1, up to four decimals", () => {
    expect(usd(0.5)).toBe("$0.50");
    expect(usd(0.123)).toBe("$0.12");
    expect(usd(0.05)).toBe("$0.05");
    expect(usd(0.0123)).toBe("$0.012");
    expect(usd(0.0016)).toBe("$0.0016");
    expect(usd(0.001)).toBe("$0.001");
    expect(usd(0.00016)).toBe("$0.0002");
    expect(usd(0.9999)).toBe("$1.00");
  });

  it('never says "$0.00" of an amount that is not zero', () => {
    for (const x of [0.004, 0.0004, 0.00004, 1e-9, 0.001, 0.0049]) expect(usd(x), String(x)).not.toMatch(/^\$0\.0+$/);
    expect(usd(0.00004)).toBe("<$0.0001");
    expect(usd(0)).toBe("$0.00");
  });

  it("keeps a sign and refuses to invent a number", () => {
    expect(usd(-0.0016)).toBe("-$0.0016");
    expect(usd(Number.NaN)).toBe("$?");
  });
});

describe("the dashboard's copy (src/web/assets/transcript.js, plain browser JavaScript)", () => {
  it("says every amount as usd() does", () => {
    const code = readFileSync(new URL("../../../src/web/assets/transcript.js", import.meta.url), "utf8");
    const sandbox: { window: { PB?: { usd: (x: number) => string } } } = { window: {} };
    runInNewContext(code, sandbox);
    const browser = sandbox.window.PB!.usd;
    for (const x of [
      0,
      1e-9,
      0.00004,
      0.00016,
      0.001,
      0.0016,
      0.0049,
      0.0123,
      0.05,
      0.5,
      0.9999,
      1,
      12.345,
      -0.0016,
      NaN,
    ])
      expect(browser(x), String(x)).toBe(usd(x));
  });
});
