// A small strict parser of the Prometheus text exposition format (0.0.4), for tests: every line must
// be a HELP, a TYPE, a comment or a well-formed sample of a declared family; histograms must be
// cumulative with a +Inf bucket equal to their count. Throws on anything else.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
export interface Family {
  name: string;
  help?: string;
  type: "counter" | "gauge" | "histogram" | "summary" | "untyped";
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

function parseValue(s: string, line: string): number {
  // as Go's strconv.ParseFloat (what Prometheus uses): inf and nan in any case (prom-client writes "Nan")
  if (/^[+]?inf(inity)?$/i.test(s)) return Infinity;
  if (/^-inf(inity)?$/i.test(s)) return -Infinity;
  if (/^nan$/i.test(s)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) throw new Error(`bad value '${s}' in: ${line}`);
  return Number(s);
}

function parseLabels(s: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  const ws = () => {
    while (s[i] === " " || s[i] === "\t") i++;
  };
  ws();
  while (i < s.length) {
    const eq = s.indexOf("=", i);
    if (eq < 0) throw new Error(`bad labels in: ${line}`);
    const name = s.slice(i, eq).trim();
    if (!LABEL.test(name)) throw new Error(`bad label name '${name}' in: ${line}`);
    if (name in labels) throw new Error(`duplicate label '${name}' in: ${line}`);
    i = eq + 1;
    if (s[i] !== '"') throw new Error(`unquoted label value in: ${line}`);
    i++;
    let v = "";
    for (;;) {
      if (i >= s.length) throw new Error(`unterminated label value in: ${line}`);
      const c = s[i]!;
      if (c === '"') break;
      if (c === "\\") {
        const n = s[i + 1];
        if (n === "\\") v += "\\";
        else if (n === '"') v += '"';
        else if (n === "n") v += "\n";
        else throw new Error(`bad escape in: ${line}`);
        i += 2;
        continue;
      }
      if (c === "\n") throw new Error(`newline in label value: ${line}`);
      v += c;
      i++;
    }
    i++;
    labels[name] = v;
    ws();
    if (i < s.length) {
      if (s[i] !== ",") throw new Error(`expected , in labels: ${line}`);
      i++;
      ws();
    }
  }
  return labels;
}

/** The family a sample name belongs to, given the declared families. */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(name);
  if (direct) return direct;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!name.endsWith(suffix)) continue;
    const f = families.get(name.slice(0, -suffix.length));
    if (f && (f.type === "histogram" || (f.type === "summary" && suffix !== "_bucket"))) return f;
  }
  return undefined;
}

export function parsePrometheusText(text: string): Map<string, Family> {
  if (text.length && !text.endsWith("\n")) throw new Error("the exposition must end with a newline");
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) continue; // a plain comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
      const f = families.get(name) ?? { name, type: "untyped" as Family["type"], samples: [] };
      if (kind === "TYPE") {
        if (!TYPES.has(rest)) throw new Error(`bad type in: ${line}`);
        if (f.samples.length) throw new Error(`TYPE after samples: ${line}`);
        f.type = rest as Family["type"];
      } else {
        if (f.help !== undefined) throw new Error(`second HELP: ${line}`);
        f.help = rest;
      }
      families.set(name, f);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+(-?\d+))?$/.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const [, name, labelText, value] = m as unknown as [string, string, string | undefined, string];
    const f = familyOf(name, families);
    if (!f) throw new Error(`sample of an undeclared family: ${line}`);
    const labels = labelText ? parseLabels(labelText, line) : {};
    const series = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(series)) throw new Error(`duplicate series: ${line}`);
    seen.add(series);
    if (name.endsWith("_bucket") && f.type === "histogram" && labels.le === undefined)
      throw new Error(`bucket without le: ${line}`);
    f.samples.push({ name, labels, value: parseValue(value, line) });
  }
  for (const f of families.values()) if (f.type === "histogram") checkHistogram(f);
  return families;
}

function checkHistogram(f: Family): void {
  const groups = new Map<string, Sample[]>();
  for (const s of f.samples.filter((x) => x.name === `${f.name}_bucket`)) {
    const { le: _le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    groups.set(key, [...(groups.get(key) ?? []), s]);
  }
  for (const [key, buckets] of groups) {
    const sorted = [...buckets].sort((a, b) => parseValue(a.labels.le!, "le") - parseValue(b.labels.le!, "le"));
    for (let i = 1; i < sorted.length; i++)
      if (sorted[i]!.value < sorted[i - 1]!.value) throw new Error(`${f.name}${key}: buckets not cumulative`);
    const inf = sorted.at(-1)!;
    if (inf.labels.le !== "+Inf") throw new Error(`${f.name}${key}: no +Inf bucket`);
    const count = f.samples.find(
      (s) => s.name === `${f.name}_count` && JSON.stringify(Object.entries(s.labels).sort()) === key,
    );
    if (!count || count.value !== inf.value)
      throw new Error(`${f.name}${key}: +Inf bucket ${inf.value} is not the count ${count?.value}`);
  }
}

/** The sum of the samples named `name` whose labels include `labels` (0 when there are none). */
export function metricValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const f of families.values()) {
    for (const s of f.samples) {
      if (s.name !== name) continue;
      if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
    }
  }
  return sum;
}
