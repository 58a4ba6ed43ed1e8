// `patchbay image build`: the sandbox image from images/sandbox/Dockerfile where its base image
// can be pulled, and otherwise offline (debootstrap + docker import) with the same recipe.
// A build is skipped when an image with the same recipe hash already exists.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as tar from "tar-stream";
import { docker } from "../backend/docker.js";

const DIR = fileURLToPath(new URL("../../images/sandbox/", import.meta.url));
const RECIPE_FILES = ["Dockerfile", "packages.txt", "build-offline.sh", "rootfs.sh"];
const BASE = "debian:bookworm-slim";

export function recipeHash(): string {
  const h = createHash("sha256");
  for (const f of RECIPE_FILES) h.update(f).update(readFileSync(DIR + f));
  return h.digest("hex").slice(0, 16);
}

export async function imageRecipe(tag: string): Promise<string | undefined> {
  try {
    const info = await docker().getImage(tag).inspect();
    return info.Config?.Labels?.["patchbay.recipe"] ?? "";
  } catch {
    return undefined;
  }
}

export interface BuildResult {
  tag: string;
  recipe: string;
  how: "cached" | "dockerfile" | "offline";
}

export async function buildImage(tag: string, opts: { force?: boolean; log?: (line: string) => void } = {}): Promise<BuildResult> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`[image] ${l}\n`));
  const recipe = recipeHash();
  if (!opts.force && (await imageRecipe(tag)) === recipe) return { tag, recipe, how: "cached" };
  if (await basePullable(log)) {
    log(`building ${tag} from images/sandbox/Dockerfile`);
    await buildFromDockerfile(tag, recipe);
    return { tag, recipe, how: "dockerfile" };
  }
  log(`${BASE} cannot be pulled here; building ${tag} offline (debootstrap + docker import)`);
  await run("bash", [DIR + "build-offline.sh", tag, recipe]);
  return { tag, recipe, how: "offline" };
}

async function basePullable(log: (l: string) => void): Promise<boolean> {
  try {
    await docker().getImage(BASE).inspect();
    return true;
  } catch {
    /* not present: try to pull */
  }
  try {
    const stream = await docker().pull(BASE, { abortSignal: AbortSignal.timeout(30_000) } as object);
    await new Promise<void>((resolve, reject) => docker().modem.followProgress(stream, (err) => (err ? reject(err) : resolve())));
    return true;
  } catch (err) {
    log(`pull ${BASE} failed: ${(err as Error).message.split("\n")[0]}`);
    return false;
  }
}

async function buildFromDockerfile(tag: string, recipe: string): Promise<void> {
  const pack = tar.pack();
  for (const f of ["Dockerfile", "packages.txt"]) pack.entry({ name: f }, readFileSync(DIR + f));
  pack.finalize();
  const stream = await docker().buildImage(pack as never, { t: tag, labels: JSON.stringify({ "patchbay.recipe": recipe }) } as object);
  await new Promise<void>((resolve, reject) =>
    docker().modem.followProgress(stream, (err, out) => {
      const failed = (out as { error?: string }[] | undefined)?.find((o) => o.error);
      if (err || failed) reject(err ?? new Error(failed!.error));
      else resolve();
    }),
  );
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "inherit", "inherit"] });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(" ")} exited with ${code}`))));
  });
}
