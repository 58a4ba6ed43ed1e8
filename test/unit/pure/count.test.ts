// Guards the one pluralizer (src/core/count.ts): "1 job", "0 jobs", "2 jobs", and irregular plurals
// given by the caller.
import { describe, expect, it } from "vitest";
import { count, plural } from "../../../src/core/count.js";

describe("count", () => {
  it("says one thing in the singular and every other count in the plural", () => {
    expect(count(1, "job")).toBe("1 job");
    expect(count(0, "job")).toBe("0 jobs");
    expect(count(2, "job")).toBe("2 jobs");
    expect(count(1.5, "second")).toBe("1.5 seconds");
  });
  it("takes an irregular plural", () => {
    expect(count(1, "directory", "directories")).toBe("1 directory");
    expect(count(3, "directory", "directories")).toBe("3 directories");
    expect(plural(1, "process", "processes")).toBe("process");
    expect(plural(7, "process", "processes")).toBe("processes");
  });
});
