// Every conformance case against the in-memory fs: the reference's wording, patchbay's byte semantics.
import { describe, expect, it } from "vitest";
import { TextEditor, type EditorFlavor } from "../../../src/tools/editor.js";
import { expandRoot, loadConformanceCases, runConformanceCase } from "../../support/conformance-cases.js";
import { MemFs } from "../../support/memfs.js";

const cases = loadConformanceCases();

describe("editor conformance (memfs)", () => {
  it("loads the shared cases", () => {
    expect(cases.length).toBeGreaterThan(0);
    expect(new Set(cases.map((c) => c.id)).size).toBe(cases.length);
  });

  it.each(cases.map((c) => [c.id, c] as const))("%s", async (_id, c) => {
    const fs = new MemFs();
    await runConformanceCase(c, (flavor) => new TextEditor(fs, { flavor }), fs);
  });

  // The runner must fail loudly, or a green run above would mean nothing.
  describe("the runner", () => {
    const byId = (id: string) => cases.find((c) => c.id === id)!;

    it("rejects a wrong output", async () => {
      const fs = new MemFs();
      const wrong = (flavor: EditorFlavor) => {
        const ed = new TextEditor(fs, { flavor });
        return { run: async (input: unknown) => ({ ...(await ed.run(input)), content: "nope" }) };
      };
      await expect(runConformanceCase(byId("view_file_trailing_newline"), wrong, fs)).rejects.toThrow();
    });

    it("rejects wrong file bytes", async () => {
      const fs = new MemFs();
      const c = byId("create_success");
      const lossy = (flavor: EditorFlavor) => {
        const ed = new TextEditor(fs, { flavor });
        return {
          run: async (input: unknown) => {
            const i = input as Record<string, unknown>;
            return ed.run({ ...i, file_text: String(i.file_text).replace(/\t/g, "    ") });
          },
        };
      };
      await expect(runConformanceCase(c, lossy, fs)).rejects.toThrow(/content of/);
    });

    it("compares a directory listing as a set only when the case says so", async () => {
      const c = byId("view_directory_listing");
      expect(c.compare_lines_unordered).toBe(true);
      const fs = new MemFs();
      const reversed = (flavor: EditorFlavor) => {
        const ed = new TextEditor(fs, { flavor });
        return {
          run: async (input: unknown) => {
            const r = await ed.run(input);
            const [head, ...rest] = r.content.split("\n");
            return { ...r, content: [head, ...rest.reverse()].join("\n") };
          },
        };
      };
      await runConformanceCase(c, reversed, fs);
      const strict = { ...c, id: "strict", compare_lines_unordered: false };
      await expect(runConformanceCase(strict, reversed, new MemFs())).rejects.toThrow();
    });

    it("expands {ROOT} in keys and values", () => {
      expect(expandRoot({ "{ROOT}/a": ["x {ROOT}"] }, "/r")).toEqual({ "/r/a": ["x /r"] });
    });
  });
});
