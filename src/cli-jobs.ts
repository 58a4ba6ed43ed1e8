// Job commands of the CLI (run, enqueue, status, ...). Filled in with the queue.
import type { Command } from "./cli.js";

export const commands: Record<string, Command> = {};
