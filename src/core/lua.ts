// Lua scripts for Redis. Each is a real file in a lua/ folder beside the module that runs it, read
// by asset() and named after BullMQ's convention `<what>-<keys>.lua`: the number of KEYS it takes,
// or `-n` for one that takes any number (given at each call). Its header says what it does, its
// KEYS and ARGV, and what it returns. A line `--- @include "includes/<name>"` is replaced by that
// file (from the script's folder), so scripts share a function without a copy of it.
// Each script is defined once per connection with ioredis' defineCommand: ioredis sends it with
// EVAL the first time on a socket, by EVALSHA after, and again when Redis answers NOSCRIPT.
import type { Redis } from "ioredis";
import { asset } from "./assets.js";

export interface LuaScript {
  /** Its path under src/ (e.g. "queue/lua/finish-job-8.lua"). */
  path: string;
  /** The number of KEYS, from its name; undefined for `-n` (the caller passes it first). */
  numberOfKeys: number | undefined;
  /** Its text with its includes in place. */
  lua: string;
}

const NAME = /^(?:[a-z0-9-]+\/)*lua\/[a-z0-9]+(?:-[a-z0-9]+)*-(\d+|n)\.lua$/;
const INCLUDE = /^--- @include "([a-z0-9-]+(?:\/[a-z0-9-]+)*)"$/gm;

/** A script's text (includes in place) and key count; throws on a name that breaks the convention. */
export function luaScript(path: string): LuaScript {
  const m = NAME.exec(path);
  if (!m) throw new Error(`lua: ${path} is not named <what>-<number of KEYS, or n>.lua in a lua/ folder`);
  const dir = path.slice(0, path.lastIndexOf("/") + 1);
  const lua = asset(path).replace(INCLUDE, (_, name: string) => {
    const text = asset(`${dir}${name}.lua`);
    if (/^--- @include /m.test(text))
      throw new Error(`lua: ${dir}${name}.lua (included by ${path}) includes another file: one level only`);
    return text;
  });
  return { path, numberOfKeys: m[1] === "n" ? undefined : Number(m[1]), lua };
}

type Arg = string | number | Buffer;

/**
 * A script as a function of a connection: `cmd(redis, ...KEYS, ...ARGV)` (for `-n`:
 * `cmd(redis, KEYS.length, ...KEYS, ...ARGV)`). The file is read now, so a missing one fails at import.
 */
export function luaCommand<R>(path: string): (redis: Redis, ...args: Arg[]) => Promise<R> {
  const { numberOfKeys, lua } = luaScript(path);
  const name = `pb:${path}`;
  const defined = new WeakSet<Redis>();
  return (redis, ...args) => {
    if (!defined.has(redis)) {
      redis.defineCommand(name, numberOfKeys === undefined ? { lua } : { numberOfKeys, lua });
      defined.add(redis);
    }
    return (redis as unknown as Record<string, (...a: Arg[]) => Promise<R>>)[name]!(...args);
  };
}
