// `patchbay image build --from DIR`: a per-repo image (a prebuilt environment: toolchains,
// dependencies) from DIR/Dockerfile, for the JobSpec's `image`. Offline, the base must already be on
// the engine; patchbay's own sandbox image is always available that way, because `patchbay image
// build` makes it offline. Whatever the image, it runs with the same hardening as any sandbox; the
// build ends by starting one from it and checking what patchbay needs inside.
import { count } from "../core/count.js";
import { createHash } from "node:crypto";
import { lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join, relative } from "node:path";
import { DEFAULT_IMAGE } from "../core/config/config.js";
import { isRemoteAdd, remoteAdds } from "./build-network.js";
import { docker } from "../backend/docker.js";
import { buildImage, imageRecipe } from "./image.js";
import { Sandbox } from "./sandbox.js";
import { kinded } from "../core/errors.js";

export class ImageFromError extends kinded("image") {}

/**
 * Set on every image this builds (its value: the context's hash). A worker's default image
 * allow-list (src/job/policy.ts) takes the images that carry it. Labels are inherited: an image the
 * operator builds FROM one of these carries it too.
 */
export const FROM_LABEL = "patchbay.built-from";

/** Whether the image carries FROM_LABEL; undefined when the engine has no such image. */
export async function builtFrom(image: string): Promise<boolean | undefined> {
  try {
    const info = await docker().getImage(image).inspect();
    return Boolean(info.Config?.Labels?.[FROM_LABEL]);
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return undefined;
    throw err;
  }
}

const MAX_FILES = 50_000;

/** The base images of a Dockerfile's stages (`FROM` lines), without earlier stages' names or `scratch`. */
export function dockerfileBases(text: string): string[] {
  const stages = new Set<string>();
  const bases: string[] = [];
  for (const raw of text.replace(/\\\r?\n/g, " ").split(/\r?\n/)) {
    const m = /^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?/i.exec(raw);
    if (!m) continue;
    const image = m[1]!;
    if (!stages.has(image.toLowerCase()) && image !== "scratch" && !bases.includes(image)) bases.push(image);
    if (m[2]) stages.add(m[2].toLowerCase());
  }
  return bases;
}

/**
 * A cheap fingerprint of the context (bounded walk): each file's path, size, mode and mtime, each
 * symlink's target, each directory's path (its mtime only repeats what its entries say); and the
 * build's network (an image built with one is not taken for one built without).
 */
function contextHash(dir: string, network: string): { hash: string; top: string[] } {
  const h = createHash("sha256").update(`network\0${network}\n`);
  let n = 0;
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = lstatSync(p);
      if (++n > MAX_FILES)
        throw new ImageFromError(`${dir}: more than ${count(MAX_FILES, "file")} in the build context`);
      const what = st.isSymbolicLink()
        ? `-> ${readlinkSync(p)}`
        : st.isDirectory()
          ? "dir"
          : `${st.size}\0${st.mode}\0${st.mtimeMs}`;
      h.update(`${relative(dir, p)}\0${what}\n`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return { hash: h.digest("hex").slice(0, 16), top: readdirSync(dir) };
}

async function present(image: string): Promise<boolean> {
  return docker()
    .getImage(image)
    .inspect()
    .then(
      () => true,
      () => false,
    );
}

async function pull(image: string): Promise<string | undefined> {
  try {
    const stream = await docker().pull(image, { abortSignal: AbortSignal.timeout(60_000) });
    await new Promise<void>((resolve, reject) =>
      docker().modem.followProgress(stream, (err) => (err ? reject(err) : resolve())),
    );
    return undefined;
  } catch (err) {
    return (err as Error).message.split("\n")[0];
  }
}

export interface FromResult {
  tag: string;
  context: string;
  how: "cached" | "built";
  bases: string[];
  /** What the check in a hardened sandbox found: uid, git, python3 (the file agent's fast lane). */
  check: { uid: string; git: boolean; python3: boolean };
}

/**
 * `network`: the build's network (RUN steps, and with it ADD of a URL); "none" by default. Without
 * one, an ADD that may fetch a URL (the engine would fetch it from its own host) is refused.
 */
/** `sandboxImage`: the worker's sandbox image (config.image), built when a FROM names it and it is missing, as DEFAULT_IMAGE is. */
export async function buildImageFrom(
  dir: string,
  tag: string,
  opts: { force?: boolean; network?: string; log?: (line: string) => void; sandboxImage?: string } = {},
): Promise<FromResult> {
  const network = opts.network ?? "none";
  const log = opts.log ?? ((l: string) => process.stderr.write(`[image] ${l}\n`));
  let dockerfile: string;
  try {
    dockerfile = readFileSync(join(dir, "Dockerfile"), "utf8");
  } catch (err) {
    throw new ImageFromError(`${dir}/Dockerfile: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const bases = dockerfileBases(dockerfile);
  const { hash, top } = contextHash(dir, network);
  let how: FromResult["how"] = "cached";
  // An image of this recipe made before FROM_LABEL existed is made again, with it.
  if (opts.force || (await imageRecipe(tag)) !== hash || !(await builtFrom(tag))) {
    const sandboxImages = new Set([DEFAULT_IMAGE, opts.sandboxImage ?? DEFAULT_IMAGE]);
    for (const base of bases) {
      if (await present(base)) continue;
      if (sandboxImages.has(base)) {
        log(`${base} is patchbay's sandbox image: building it`);
        await buildImage(base, { log });
        continue;
      }
      const why = await pull(base);
      if (why !== undefined)
        throw new ImageFromError(
          `the base image ${base} is not on this engine and cannot be pulled (${why}); offline, start the Dockerfile FROM ${DEFAULT_IMAGE} (patchbay image build makes it without a registry) or docker load the base first`,
        );
    }
    if (network === "none") await refuseFetches(dockerfile, bases);
    log(`building ${tag} from ${dir}/Dockerfile${network === "none" ? "" : ` (network: ${network})`}`);
    const stream = await docker().buildImage({ context: dir, src: top }, {
      t: tag,
      rm: true,
      forcerm: true,
      networkmode: network,
      labels: JSON.stringify({ "patchbay.recipe": hash, [FROM_LABEL]: hash }),
    } as object);
    await new Promise<void>((resolve, reject) =>
      docker().modem.followProgress(stream, (err, out) => {
        const failed = (out as { error?: string }[] | undefined)?.find((o) => o.error);
        if (err || failed)
          reject(new ImageFromError(`docker build of ${dir} failed: ${err?.message ?? failed!.error}`));
        else resolve();
      }),
    );
    how = "built";
  }
  return { tag, context: hash, how, bases, check: await checkImage(tag) };
}

/** With no build network: an ADD of the Dockerfile's, or an ONBUILD trigger of a base's, that may fetch a URL. */
async function refuseFetches(dockerfile: string, bases: string[]): Promise<void> {
  const found = remoteAdds(dockerfile).map((a) => `line ${a.line}: ${JSON.stringify(a.text)}`);
  for (const base of bases) {
    const triggers = await docker()
      .getImage(base)
      .inspect()
      .then(
        (i) => (i.Config?.OnBuild ?? []) as string[],
        () => [],
      );
    for (const t of triggers) if (isRemoteAdd(t)) found.push(`ONBUILD of ${base}: ${JSON.stringify(t.slice(0, 200))}`);
  }
  if (found.length)
    throw new ImageFromError(
      `the Dockerfile may fetch a URL with ADD, which the engine does from its own host whatever the build's network (${found.slice(0, 5).join("; ")}): put the file into the build context and COPY it, or pass --network NAME to allow the build a network`,
    );
}

/** Starts a sandbox from the image with the usual hardening and checks what patchbay needs. */
export async function checkImage(image: string): Promise<FromResult["check"]> {
  let sb: Sandbox;
  try {
    sb = await Sandbox.create({ image, labels: { "patchbay.check": "1" }, deadlineSec: 600 });
  } catch (err) {
    throw new ImageFromError(
      `${image} does not start as a patchbay sandbox (it needs python3, which runs patchbay's helper, the parent of every process in the sandbox, and bash and coreutils): ${(err as Error).message.split("\n")[0]}`,
    );
  }
  try {
    // An exec, not the shell: the shell's first command needs the supervisor. (The helper, which
    // starts both, already ran on the image's python3: an image without one fails to start above.)
    const r = await sb.exec(
      ["bash", "-c", "id -u; command -v git >/dev/null && echo git; command -v python3 >/dev/null && echo python3"],
      { timeoutSec: 60 },
    );
    const lines = r.stdout.toString().trim().split("\n");
    const check = { uid: lines[0] ?? "", git: lines.includes("git"), python3: lines.includes("python3") };
    if (!check.git)
      throw new ImageFromError(
        `${image} has no git: patchbay takes the baseline and the patch with git in the sandbox`,
      );
    if (!check.python3)
      throw new ImageFromError(
        `${image} has no python3: patchbay's supervisor (which kills the agent's processes) runs on it in the sandbox`,
      );
    return check;
  } finally {
    await sb.destroy();
  }
}
