// An OTLP/HTTP trace receiver on loopback: POST /v1/traces with a protobuf ExportTraceServiceRequest,
// as a collector takes it. @opentelemetry/otlp-transformer 0.301 exports serializers only (no
// decoder), so the payload is decoded here: the protobuf wire format and the field numbers of
// opentelemetry-proto's trace/v1/trace.proto, common/v1/common.proto and resource/v1/resource.proto.
// test/unit/telemetry-parts.test.ts checks this decoder against otlp-transformer's serializer.
import { EventEmitter } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export type AnyValue = string | boolean | number | Buffer | AnyValue[] | { [k: string]: AnyValue } | undefined;
export type Attrs = Record<string, AnyValue>;

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Attrs;
  events: { name: string; attributes: Attrs }[];
  links: { traceId: string; spanId: string; attributes: Attrs }[];
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Attrs;
  scope: string;
}

interface Field {
  no: number;
  /** A varint's value, or a length-delimited/fixed field's bytes. */
  int?: bigint;
  bytes?: Buffer;
}

/** The fields of one protobuf message, in order. */
export function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let r = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const b = buf[i++];
      if (b === undefined) throw new Error("truncated varint");
      r |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return r;
    }
  };
  const take = (n: number) => {
    if (i + n > buf.length) throw new Error("truncated field");
    const b = buf.subarray(i, i + n);
    i += n;
    return b;
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ no, int: varint() });
    else if (wire === 1) out.push({ no, bytes: take(8) });
    else if (wire === 2) out.push({ no, bytes: take(Number(varint())) });
    else if (wire === 5) out.push({ no, bytes: take(4) });
    else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}

const str = (f: Field) => f.bytes!.toString("utf8");
const hex = (f: Field) => f.bytes!.toString("hex");

function anyValue(buf: Buffer): AnyValue {
  const f = fields(buf)[0];
  if (!f) return undefined;
  switch (f.no) {
    case 1:
      return str(f);
    case 2:
      return f.int !== 0n;
    case 3:
      return Number(BigInt.asIntN(64, f.int!));
    case 4:
      return f.bytes!.readDoubleLE(0);
    case 5:
      return fields(f.bytes!)
        .filter((x) => x.no === 1)
        .map((x) => anyValue(x.bytes!));
    case 6:
      return attrs(fields(f.bytes!), 1);
    case 7:
      return f.bytes;
    default:
      return undefined;
  }
}

/** KeyValue messages (key 1, value 2) at field `no` of a message. */
function attrs(fs: Field[], no: number): Attrs {
  const out: Attrs = {};
  for (const f of fs.filter((x) => x.no === no)) {
    const kv = fields(f.bytes!);
    const key = kv.find((x) => x.no === 1);
    const value = kv.find((x) => x.no === 2);
    if (key) out[str(key)] = value ? anyValue(value.bytes!) : undefined;
  }
  return out;
}

function span(buf: Buffer, resource: Attrs, scope: string): OtlpSpan {
  const fs = fields(buf);
  const one = (no: number) => fs.find((x) => x.no === no);
  const status = one(15) ? fields(one(15)!.bytes!) : [];
  return {
    traceId: one(1) ? hex(one(1)!) : "",
    spanId: one(2) ? hex(one(2)!) : "",
    parentSpanId: one(4) ? hex(one(4)!) : "",
    name: one(5) ? str(one(5)!) : "",
    kind: Number(one(6)?.int ?? 0n),
    startNs: one(7)?.bytes?.readBigUInt64LE(0) ?? 0n,
    endNs: one(8)?.bytes?.readBigUInt64LE(0) ?? 0n,
    attributes: attrs(fs, 9),
    events: fs
      .filter((x) => x.no === 11)
      .map((e) => {
        const ef = fields(e.bytes!);
        const name = ef.find((x) => x.no === 2);
        return { name: name ? str(name) : "", attributes: attrs(ef, 3) };
      }),
    links: fs
      .filter((x) => x.no === 13)
      .map((l) => {
        const lf = fields(l.bytes!);
        const t = lf.find((x) => x.no === 1);
        const s = lf.find((x) => x.no === 2);
        return { traceId: t ? hex(t) : "", spanId: s ? hex(s) : "", attributes: attrs(lf, 4) };
      }),
    status: {
      code: Number(status.find((x) => x.no === 3)?.int ?? 0n),
      message: status.find((x) => x.no === 2) ? str(status.find((x) => x.no === 2)!) : "",
    },
    resource,
    scope,
  };
}

/** An ExportTraceServiceRequest's spans, each with its resource's attributes and its scope's name. */
export function decodeTraces(buf: Buffer): OtlpSpan[] {
  return fields(buf)
    .filter((f) => f.no === 1)
    .flatMap((rs) => {
      const rf = fields(rs.bytes!);
      const res = rf.find((x) => x.no === 1);
      const resource = res ? attrs(fields(res.bytes!), 1) : {};
      return rf
        .filter((x) => x.no === 2)
        .flatMap((ss) => {
          const sf = fields(ss.bytes!);
          const sc = sf.find((x) => x.no === 1);
          const scopeName = sc ? fields(sc.bytes!).find((x) => x.no === 1) : undefined;
          return sf.filter((x) => x.no === 2).map((s) => span(s.bytes!, resource, scopeName ? str(scopeName) : ""));
        });
    });
}

export interface OtlpReceiver {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (spans are POSTed to /v1/traces). */
  url: string;
  spans: OtlpSpan[];
  /** Export requests received (any path). */
  requests: number;
  /** Resolves once `pred` holds for the spans received so far (checked on each export). */
  until<T>(pred: (spans: OtlpSpan[]) => T | undefined | false): Promise<T>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const got = new EventEmitter();
  const r: OtlpReceiver = {
    url: "",
    spans: [],
    requests: 0,
    until: (pred) =>
      new Promise((resolve) => {
        const check = () => {
          const v = pred(r.spans);
          if (!v) return false;
          got.off("spans", check);
          resolve(v);
          return true;
        };
        if (!check()) got.on("spans", check);
      }),
    close: () => new Promise((done) => server.close(() => done())),
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      r.requests++;
      if (req.method === "POST" && req.url === "/v1/traces") r.spans.push(...decodeTraces(Buffer.concat(chunks)));
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end(); // an empty ExportTraceServiceResponse
      got.emit("spans");
    });
  });
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return r;
}

/** Every string in a span's attributes, its events', its links' and its resource's (keys and values). */
export function strings(s: OtlpSpan): string[] {
  const walk = (v: AnyValue): string[] =>
    typeof v === "string"
      ? [v]
      : Buffer.isBuffer(v)
        ? [v.toString("latin1")]
        : Array.isArray(v)
          ? v.flatMap(walk)
          : v && typeof v === "object"
            ? Object.entries(v).flatMap(([k, x]) => [k, ...walk(x)])
            : [];
  return [
    s.name,
    s.status.message,
    ...walk(s.attributes),
    ...walk(s.resource),
    ...s.events.flatMap((e) => [e.name, ...walk(e.attributes)]),
    ...s.links.flatMap((l) => walk(l.attributes)),
  ];
}
