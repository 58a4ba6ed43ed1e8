#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, so `npx patchbay` works right after `npm ci` with no build step.
import { register } from "tsx/esm/api";
register();
await import("../src/cli.ts");
