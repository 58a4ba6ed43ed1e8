// A second host for real: a second Docker engine on this machine (test/support/engine.ts: its own
// dockerd, data-root, exec-root, socket, containerd and cgroups), with one worker per engine sharing
// one Redis. The "host" can be killed whole (dockerd, containerd, shims, container processes).
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { docker as mainDocker } from "../src/sandbox/docker.js";
import { startEngine, type Engine } from "./support/engine.js";

const IMAGE = process.env.PATCHBAY_IMAGE ?? "patchbay-sandbox:latest";
let b: Engine;

/** A process that runs (a zombie waiting for this machine's init to reap it does not). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

beforeAll(async () => {
  b = await startEngine("second-host");
  await b.loadImage(IMAGE);
}, 300_000);

afterAll(async () => {
  await b?.stop();
}, 120_000);

describe("the second engine", () => {
  it("is its own engine: a container there is not on the main engine, and a killed host comes back", async () => {
    const [mainInfo, bInfo] = await Promise.all([mainDocker().info(), b.docker.info()]);
    expect(bInfo.ID).not.toBe(mainInfo.ID);
    expect(bInfo.DockerRootDir).toBe("/var/lib/patchbay-engines/second-host");

    const c = await b.docker.createContainer({ Image: IMAGE, Cmd: ["sleep", "infinity"], Entrypoint: [], Labels: { "patchbay.test": "second-host" }, HostConfig: { NetworkMode: "none" } });
    await c.start();
    const pid = (await c.inspect()).State.Pid;
    expect(running(pid)).toBe(true);
    await expect(mainDocker().getContainer(c.id).inspect()).rejects.toMatchObject({ statusCode: 404 });

    await b.kill(); // dockerd, containerd, the shim and the container's processes, all SIGKILLed
    expect(await b.running()).toBe(false);
    expect(running(pid)).toBe(false);
    // The main engine lives on, and never had the container.
    expect((await mainDocker().info()).ID).toBe(mainInfo.ID);
    expect(await mainDocker().listContainers({ all: true, filters: { label: ["patchbay.test=second-host"] } })).toEqual([]);

    await b.start();
    const after = await c.inspect();
    expect(after.State.Running).toBe(false);
    await c.remove({ force: true, v: true });
    await expect(c.inspect()).rejects.toMatchObject({ statusCode: 404 });
  });
});
