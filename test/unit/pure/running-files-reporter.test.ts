// The reporter that names test files still running long after they started
// (test/support/running-files-reporter.ts): silent while files end in time, names the long ones,
// and ends the run once one is stuck.
import { afterEach, describe, expect, it, vi } from "vitest";
import RunningFilesReporter from "../../support/running-files-reporter.js";
import type { TestCase, TestModule } from "vitest/node";

const mod = (id: string, project = "e2e") =>
  ({ moduleId: `${process.cwd()}/${id}`, project: { name: project } }) as TestModule;
const test = (m: TestModule, fullName: string) => ({ module: m, fullName }) as TestCase;

describe("the running-files reporter", () => {
  afterEach(() => vi.restoreAllMocks());

  it("says nothing while every file is young, names one past 10 minutes, forgets one that ended", () => {
    const write = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const r = new RunningFilesReporter();
    const t0 = Date.now();
    r.onTestModuleStart(mod("test/e2e/slow.test.ts"));
    r.onTestModuleStart(mod("test/e2e/quick.test.ts"));
    r.check(t0 + 5 * 60_000);
    expect(write).not.toHaveBeenCalled();
    r.onTestModuleEnd(mod("test/e2e/quick.test.ts"));
    r.check(t0 + 11 * 60_000);
    expect(write).toHaveBeenCalledTimes(1);
    expect(String(write.mock.calls[0]![0])).toMatch(
      /^\[running-files\] still running: test\/e2e\/slow\.test\.ts \[e2e\] \(66\d s\)\n$/,
    );
  });

  it("tells the same file's projects apart and names the test that started last in each", () => {
    const write = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const r = new RunningFilesReporter();
    const t0 = Date.now();
    const a = mod("test/integration/engines/x.test.ts", "integration");
    const b = mod("test/integration/engines/x.test.ts", "podman");
    r.onTestModuleStart(a);
    r.onTestModuleStart(b);
    r.onTestCaseReady(test(b, "hostile > a fork bomb"));
    r.onTestModuleEnd(a);
    r.check(t0 + 11 * 60_000);
    expect(String(write.mock.calls[0]![0])).toMatch(
      /still running: test\/integration\/engines\/x\.test\.ts \[podman\] \(66\d s; its latest test, for 66\d s: hostile > a fork bomb\)\n$/,
    );
  });

  it("ends the run with status 1 once a file has run for 40 minutes", () => {
    vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const exit = vi.spyOn(process, "exit").mockImplementation((() => undefined) as never);
    const r = new RunningFilesReporter();
    r.onTestModuleStart(mod("test/e2e/stuck.test.ts"));
    r.check(Date.now() + 30 * 60_000);
    expect(exit).not.toHaveBeenCalled();
    r.check(Date.now() + 41 * 60_000);
    expect(exit).toHaveBeenCalledWith(1);
  });
});
