// The scripted model's setting: PATCHBAY_MODEL=scripted:FILE, or `patchbay worker --scripted FILE`
// (the same field, parsed here once). The worker then answers every job from FILE (a script of
// turns, or a recorded transcript.jsonl: src/agent/script-file.ts) with no API and no key, and
// every event and result names the model `scripted:<FILE's basename>`, never priced.
import { basename, isAbsolute, resolve } from "node:path";

/** The prefix of a scripted model's setting and name. */
export const SCRIPTED_PREFIX = "scripted:";

/** A worker's scripted model: the file it plays and the name every event and result carries. */
export interface ScriptedModelConfig {
  /** The script file, an absolute path. */
  file: string;
  /** `scripted:<the file's basename>`: the model's name in every event and result. */
  name: string;
}

/** Whether a model name is a scripted model's (such a model is never priced: its cost is 0). */
export const isScriptedModel = (model: string): boolean => model.startsWith(SCRIPTED_PREFIX);

/** The scripted model a setting names (`scripted:FILE`, FILE relative to `cwd`), or undefined for any other model id. */
export function scriptedModelOf(setting: string, cwd: string): ScriptedModelConfig | undefined {
  if (!isScriptedModel(setting)) return undefined;
  return scriptedModelAt(setting.slice(SCRIPTED_PREFIX.length), cwd);
}

/** The scripted model of a file (`--scripted FILE`); throws naming the setting when FILE is empty. */
export function scriptedModelAt(file: string, cwd: string): ScriptedModelConfig {
  if (!file.trim())
    throw new Error(`a scripted model needs a file: scripted:FILE (e.g. scripted:examples/clamp/scripted.yaml)`);
  const abs = isAbsolute(file) ? file : resolve(cwd, file);
  return { file: abs, name: `${SCRIPTED_PREFIX}${basename(abs)}` };
}

/** The model a job runs with: a scripted worker's for every job (a spec's `model` is not sent anywhere), else the spec's, else the worker's default. */
export function jobModel(
  spec: { model?: string | undefined },
  config: { model: string; scripted?: ScriptedModelConfig | undefined },
): string {
  return config.scripted?.name ?? spec.model ?? config.model;
}

/** A Config with the scripted model of `file` (`worker --scripted FILE`, relative to `cwd`): every job's model. */
export function withScriptedModel<C extends { model: string; scripted?: ScriptedModelConfig | undefined }>(
  config: C,
  file: string,
  cwd: string,
): C {
  const scripted = scriptedModelAt(file, cwd);
  return { ...config, model: scripted.name, scripted };
}
