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

/** What buildImage made. */
export interface BuildResult {
  /** The image's tag. */
  tag: string;
  /** The recipe's hash, recorded on the image as the label patchbay.recipe. */
  recipe: string;
  /** How: an image of the same recipe was there already, built from the Dockerfile, or built offline. */
  how: "cached" | "dockerfile" | "offline";
}

/** How buildImage builds. */
export interface BuildImageOptions {
  /**
   * Builds even when an image of the same recipe has the tag.
   * @default false
   */
  force?: boolean;
  /**
   * Where progress lines go.
   * @default stderr, each line prefixed with [image]
   */
  log?: (line: string) => void;
}

/**
 * Builds the sandbox image under `tag` from images/sandbox/Dockerfile, or offline (debootstrap and
 * docker import) where its base image cannot be pulled; skipped when the tag has the same recipe.
 */
export async function buildImage(tag: string, opts: BuildImageOptions = {}): Promise<BuildResult> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`[image] ${l}\n`));
  const recipe = recipeHash();
  if (!opts.force && (await imageRecipe(tag)) === recipe) return { tag, recipe, how: "cached" };
  const pulled = await pullBase();
  if (pulled === true) {
    log(`building ${tag} from images/sandbox/Dockerfile`);
    await buildFromDockerfile(tag, recipe);
    return { tag, recipe, how: "dockerfile" };
  }
  log(`${pullFailure(BASE, pulled)}; building ${tag} offline (debootstrap + docker import)`);
  await run("bash", [DIR + "build-offline.sh", tag, recipe]);
  return { tag, recipe, how: "offline" };
}

/** Network failures on the way to a registry, as the engine words them (Docker's Go errors, Podman's). */
const UNREACHABLE =
  /dial tcp|no such host|lookup |i\/o timeout|connection refused|network is unreachable|TLS handshake timeout|Client\.Timeout|proxyconnect|temporary failure in name resolution|operation was aborted|timed? ?out/i;

/**
 * What a failed pull of `image` means, in a sentence (without the engine's "(HTTP code 500) server
 * error - Get …" wrapping): no registry reachable, the image not there, or the engine's first line,
 * bounded. Pure: the engine's message is its only input.
 */
export function pullFailure(image: string, message: string): string {
  const first = (message.split("\n")[0] ?? "").replace(/^\(HTTP code \d+\)\s*[a-z ]*-\s*/i, "").trim();
  if (UNREACHABLE.test(first)) return `no registry reachable to pull ${image}`;
  if (/manifest unknown|not found|pull access denied|does not exist/i.test(first))
    return `${image} is not on its registry (${first.slice(0, 160)})`;
  return `${image} cannot be pulled (${first.slice(0, 160) || "no reason given"})`;
}

/** true when the base image is here or pulled; else the engine's reason it could not be pulled. */
async function pullBase(): Promise<true | string> {
  try {
    await docker().getImage(BASE).inspect();
    return true;
  } catch {
    /* not present: try to pull */
  }
  try {
    const stream = await docker().pull(BASE, { abortSignal: AbortSignal.timeout(30_000) });
    await new Promise<void>((resolve, reject) =>
      docker().modem.followProgress(stream, (err) => (err ? reject(err) : resolve())),
    );
    return true;
  } catch (err) {
    return (err as Error).message ?? String(err);
  }
}

async function buildFromDockerfile(tag: string, recipe: string): Promise<void> {
  const pack = tar.pack();
  for (const f of ["Dockerfile", "packages.txt"]) pack.entry({ name: f }, readFileSync(DIR + f));
  pack.finalize();
  const stream = await docker().buildImage(
    pack as never,
    { t: tag, labels: JSON.stringify({ "patchbay.recipe": recipe }) } as object,
  );
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
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(" ")} exited with ${code}`)),
    );
  });
}
