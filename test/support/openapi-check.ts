// Checks requests and responses against an OpenAPI 3.0 description (GitHub's published one, read
// from node_modules/@octokit/openapi at test time and never copied into the repo). Only the
// operations a stand-in serves are compiled, with the components they reach through $ref, so a
// 13 MB description costs little; every path template is still matched, so a request to a path the
// description lacks is told apart from one to an operation the stand-in does not serve.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

type Json = any;
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const esc = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

/** GitHub's REST description, as @octokit/openapi publishes it. */
export function gitHubDescription(): Json {
  const file = createRequire(import.meta.url).resolve("@octokit/openapi/generated/api.github.com.json");
  return JSON.parse(readFileSync(file, "utf8"));
}

interface Template {
  template: string;
  re: RegExp;
  names: string[];
  literals: number;
}

interface Param {
  name: string;
  in: "path" | "query";
  required: boolean;
  check: ValidateFunction;
  /** The schema's type, so that a query string is read as a number or a boolean where one is meant. */
  type?: string;
}

interface Op {
  params: Param[];
  body?: { required: boolean; check: ValidateFunction };
  responses: Map<string, ValidateFunction>;
}

export type Route =
  | { kind: "served"; method: string; template: string; params: Record<string, string> }
  | { kind: "unserved"; method: string; template: string }
  | { kind: "unknown" };

const errorsOf = (v: ValidateFunction): string =>
  (v.errors ?? [])
    .slice(0, 5)
    .map(
      (e) =>
        `${e.instancePath || "(root)"} ${e.message ?? ""}${e.params && "allowedValues" in e.params ? ` ${JSON.stringify(e.params.allowedValues)}` : ""}`,
    )
    .join("; ");

export class OpenApiCheck {
  private readonly templates: Template[];
  private readonly ops = new Map<string, Op>();
  private readonly doc: Json;

  /** `served`: `METHOD /template` for each operation the stand-in answers. */
  constructor(doc: Json, served: readonly string[]) {
    this.doc = doc;
    this.templates = Object.keys(doc.paths).map((template) => {
      const names: string[] = [];
      const re = new RegExp(
        `^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{([^}]+)\}/g, (_, n: string) => (names.push(n), "([^/]+)"))}$`,
      );
      return { template, re, names, literals: template.split("/").filter((s) => s && !s.startsWith("{")).length };
    });
    const mini = this.miniDoc(served);
    // No type coercion: a body field of the wrong type must fail (query strings are read by type in checkRequest).
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
    addFormats(ajv);
    for (const f of this.formats(mini)) if (!ajv.formats[f]) ajv.addFormat(f, true);
    ajv.addSchema(mini, "api.json");
    for (const key of served) this.ops.set(key, this.compileOp(ajv, key));
  }

  /** The description's template for a request, and whether the stand-in serves it (literal segments win over parameters). */
  route(method: string, pathname: string): Route {
    const m = method.toLowerCase();
    const hits = this.templates
      .filter((t) => t.re.test(pathname) && this.doc.paths[t.template][m])
      .sort((a, b) => b.literals - a.literals);
    const t = hits[0];
    if (!t) return { kind: "unknown" };
    const key = `${method.toUpperCase()} ${t.template}`;
    if (!this.ops.has(key)) return { kind: "unserved", method: method.toUpperCase(), template: t.template };
    const values = t.re.exec(pathname)!.slice(1);
    const params: Record<string, string> = {};
    t.names.forEach((n, i) => (params[n] = decodeURIComponent(values[i]!)));
    return { kind: "served", method: method.toUpperCase(), template: t.template, params };
  }

  /** What is wrong with a request to a served operation: its path, query and JSON body against their schemas. */
  checkRequest(
    route: Extract<Route, { kind: "served" }>,
    query: URLSearchParams,
    body: { present: boolean; json?: unknown; contentType?: string },
  ): string[] {
    const op = this.ops.get(`${route.method} ${route.template}`)!;
    const out: string[] = [];
    for (const p of op.params) {
      const raw = p.in === "path" ? route.params[p.name] : (query.get(p.name) ?? undefined);
      if (raw === undefined) {
        if (p.required) out.push(`${p.in} parameter ${p.name} is required`);
        continue;
      }
      const value =
        p.type === "integer" || p.type === "number"
          ? /^-?\d+(\.\d+)?$/.test(raw)
            ? Number(raw)
            : raw
          : p.type === "boolean"
            ? raw === "true"
              ? true
              : raw === "false"
                ? false
                : raw
            : raw;
      if (!p.check(value)) out.push(`${p.in} parameter ${p.name}: ${errorsOf(p.check)}`);
    }
    if (op.body) {
      if (!body.present) {
        if (op.body.required) out.push("a JSON body is required");
      } else if (!/^application\/json\b/.test(body.contentType ?? ""))
        out.push(`the body's content-type is ${JSON.stringify(body.contentType)}, not application/json`);
      else if (body.json === undefined) out.push("the body is not JSON");
      else if (!op.body.check(body.json)) out.push(`body: ${errorsOf(op.body.check)}`);
    } else if (body.present) out.push("this operation takes no body");
    return out;
  }

  /** What is wrong with a response: its JSON against the schema the description gives for that status (none given: nothing checked). */
  checkResponse(route: Extract<Route, { kind: "served" }>, status: number, json: unknown): string[] {
    const check = this.ops.get(`${route.method} ${route.template}`)!.responses.get(String(status));
    if (!check || check(json)) return [];
    return [`${route.method} ${route.template} ${status}: ${errorsOf(check)}`];
  }

  private resolve(node: Json): { node: Json; pointer?: string } {
    if (node && typeof node.$ref === "string") {
      const pointer = node.$ref.slice(1);
      return {
        node: pointer
          .split("/")
          .slice(1)
          .reduce((o: Json, k: string) => o[k.replace(/~1/g, "/").replace(/~0/g, "~")], this.doc),
        pointer,
      };
    }
    return { node };
  }

  private compileOp(ajv: Ajv, key: string): Op {
    const [method, template] = key.split(" ") as [string, string];
    const at = `/paths/${esc(template)}/${method.toLowerCase()}`;
    const op = this.doc.paths[template][method.toLowerCase()];
    const ref = (pointer: string) => ajv.compile({ $ref: `api.json#${pointer}` });
    const params: Param[] = (op.parameters ?? []).map((raw: Json, i: number) => {
      const { node, pointer } = this.resolve(raw);
      return {
        name: node.name,
        in: node.in,
        required: !!node.required,
        type: node.schema?.type,
        check: ref(`${pointer ?? `${at}/parameters/${i}`}/schema`),
      };
    });
    let body: Op["body"];
    if (op.requestBody) {
      const { node, pointer } = this.resolve(op.requestBody);
      if (node.content?.["application/json"])
        body = {
          required: !!node.required,
          check: ref(`${pointer ?? `${at}/requestBody`}/content/application~1json/schema`),
        };
    }
    const responses = new Map<string, ValidateFunction>();
    for (const [status, raw] of Object.entries(op.responses ?? {})) {
      const { node, pointer } = this.resolve(raw);
      if (node.content?.["application/json"]?.schema)
        responses.set(status, ref(`${pointer ?? `${at}/responses/${status}`}/content/application~1json/schema`));
    }
    return { params, body, responses };
  }

  /** The served operations and every component they reach, in the description's own layout. */
  private miniDoc(served: readonly string[]): Json {
    const mini: Json = { paths: {}, components: {} };
    const seen = new Set<string>();
    const walk = (node: Json): void => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (!node || typeof node !== "object") return;
      // OpenAPI 3.0's `nullable: true` admits null even beside an enum that does not list it (a check run's conclusion); ajv reads the enum alone.
      if (node.nullable === true && Array.isArray(node.enum) && !node.enum.includes(null))
        node.enum = [...node.enum, null];
      if (typeof node.$ref === "string" && !seen.has(node.$ref)) {
        seen.add(node.$ref);
        const [, , kind, name] = node.$ref.split("/") as string[];
        const target = this.doc.components[kind!][name!];
        (mini.components[kind!] ??= {})[name!] = target;
        walk(target);
      }
      for (const v of Object.values(node)) walk(v);
    };
    for (const key of served) {
      const [method, template] = key.split(" ") as [string, string];
      const op = this.doc.paths[template]?.[method.toLowerCase()];
      if (!op) throw new Error(`the description has no ${key}`);
      (mini.paths[template] ??= {})[method.toLowerCase()] = op;
      walk(op);
    }
    return mini;
  }

  private formats(node: Json, into = new Set<string>()): Set<string> {
    if (Array.isArray(node)) node.forEach((n) => this.formats(n, into));
    else if (node && typeof node === "object") {
      if (typeof node.format === "string") into.add(node.format);
      for (const v of Object.values(node)) this.formats(v, into);
    }
    return into;
  }
}
