// A Forge whose API client is made on its first call: Octokit and gitbeaker are optional
// packages, so a campaign that only pushes branches (or never publishes) loads neither, and one
// that calls the API without them installed gets the error naming the `npm i` that adds them.
import type { Forge, ForgeKind, PullRequestInput, PullRequestUpdate, ForgeRepo } from "./forge.js";

/** Forwards every call to the Forge `load` makes, made once, on the first call. */
export class LazyForge implements Forge {
  private real?: Promise<Forge>;

  constructor(
    readonly kind: ForgeKind,
    private readonly load: () => Promise<Forge>,
  ) {}

  private forge(): Promise<Forge> {
    return (this.real ??= this.load());
  }

  async findOpen(repo: ForgeRepo, head: string, base: string) {
    return (await this.forge()).findOpen(repo, head, base);
  }
  async create(repo: ForgeRepo, pr: PullRequestInput) {
    return (await this.forge()).create(repo, pr);
  }
  async update(repo: ForgeRepo, number: number, change: PullRequestUpdate) {
    return (await this.forge()).update(repo, number, change);
  }
  async status(repo: ForgeRepo, number: number) {
    return (await this.forge()).status(repo, number);
  }
  async close(repo: ForgeRepo, number: number) {
    return (await this.forge()).close(repo, number);
  }
}
