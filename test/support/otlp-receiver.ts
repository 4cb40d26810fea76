import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

/*
 * An OTLP receiver for the tests, as a collector is one: OTLP over HTTP/protobuf (POST /v1/traces,
 * /v1/metrics) or over gRPC, each request decoded with the OpenTelemetry project's own protobuf
 * definitions (test/support/otlp-proto). What it keeps is what a backend would show.
 */

const PROTO_DIR = join(import.meta.dirname, "otlp-proto");
const TRACE_PROTO = "opentelemetry/proto/collector/trace/v1/trace_service.proto";
const METRICS_PROTO = "opentelemetry/proto/collector/metrics/v1/metrics_service.proto";

export type AttributeValue = string | number | boolean | AttributeValue[] | undefined;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root. */
  parentSpanId: string;
  name: string;
  startMs: number;
  endMs: number;
  attributes: Record<string, AttributeValue>;
  /** The OTLP value's kind of each attribute (`stringValue`, `intValue`, `doubleValue`, …): their types. */
  kinds: Record<string, string>;
  events: Array<{ name: string; attributes: Record<string, AttributeValue> }>;
  links: Array<{ traceId: string; spanId: string }>;
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, AttributeValue>;
}

export interface ReceivedMetric {
  name: string;
  unit: string;
  /** Each data point's attributes and its value (a sum's, a gauge's) or a histogram's count and sum. */
  points: Array<{ attributes: Record<string, AttributeValue>; value?: number; count?: number; sum?: number }>;
  resource: Record<string, AttributeValue>;
}

type Json = Record<string, unknown>;

const hex = (bytes: unknown) => (bytes instanceof Uint8Array ? Buffer.from(bytes).toString("hex") : "");

function anyValue(any: Json | undefined): { value: AttributeValue; kind: string } {
  if (!any) return { value: undefined, kind: "none" };
  for (const kind of ["stringValue", "boolValue", "intValue", "doubleValue"] as const)
    if (kind in any) {
      const value = any[kind];
      return { value: kind === "intValue" ? Number(value) : (value as AttributeValue), kind };
    }
  if ("arrayValue" in any) {
    const values = ((any.arrayValue as Json).values as Json[] | undefined) ?? [];
    return { value: values.map((v) => anyValue(v).value), kind: "arrayValue" };
  }
  return { value: undefined, kind: Object.keys(any)[0] ?? "none" };
}

function attributesOf(list: unknown): {
  values: Record<string, AttributeValue>;
  kinds: Record<string, string>;
} {
  const values: Record<string, AttributeValue> = {};
  const kinds: Record<string, string> = {};
  for (const kv of (list as Json[] | undefined) ?? []) {
    const { value, kind } = anyValue(kv.value as Json | undefined);
    values[kv.key as string] = value;
    kinds[kv.key as string] = kind;
  }
  return { values, kinds };
}

const millis = (nanos: unknown) => Number(BigInt(String(nanos ?? 0)) / 1_000_000n);

function spansOf(request: Json): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of (request.resourceSpans as Json[] | undefined) ?? []) {
    const resource = attributesOf((rs.resource as Json | undefined)?.attributes).values;
    for (const ss of (rs.scopeSpans as Json[] | undefined) ?? [])
      for (const span of (ss.spans as Json[] | undefined) ?? []) {
        const { values, kinds } = attributesOf(span.attributes);
        const status = (span.status as Json | undefined) ?? {};
        spans.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name as string,
          startMs: millis(span.startTimeUnixNano),
          endMs: millis(span.endTimeUnixNano),
          attributes: values,
          kinds,
          events: ((span.events as Json[] | undefined) ?? []).map((e) => ({
            name: e.name as string,
            attributes: attributesOf(e.attributes).values,
          })),
          links: ((span.links as Json[] | undefined) ?? []).map((l) => ({
            traceId: hex(l.traceId),
            spanId: hex(l.spanId),
          })),
          status: { code: Number(status.code ?? 0), message: (status.message as string) ?? "" },
          resource,
        });
      }
  }
  return spans;
}

function metricsOf(request: Json): ReceivedMetric[] {
  const metrics: ReceivedMetric[] = [];
  for (const rm of (request.resourceMetrics as Json[] | undefined) ?? []) {
    const resource = attributesOf((rm.resource as Json | undefined)?.attributes).values;
    for (const sm of (rm.scopeMetrics as Json[] | undefined) ?? [])
      for (const metric of (sm.metrics as Json[] | undefined) ?? []) {
        const data = (metric.sum ?? metric.gauge ?? metric.histogram) as Json | undefined;
        const points = ((data?.dataPoints as Json[] | undefined) ?? []).map((p) => ({
          attributes: attributesOf(p.attributes).values,
          ...("asDouble" in p
            ? { value: Number(p.asDouble) }
            : "asInt" in p
              ? { value: Number(p.asInt) }
              : {}),
          ...("count" in p ? { count: Number(p.count), sum: Number(p.sum ?? 0) } : {}),
        }));
        metrics.push({ name: metric.name as string, unit: (metric.unit as string) ?? "", points, resource });
      }
  }
  return metrics;
}

/** A receiver of OTLP over HTTP/protobuf, on a free loopback port. */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly metrics: ReceivedMetric[] = [];
  /** The `authorization` (and other) headers of each request, as sent. */
  readonly headers: Array<Record<string, string | string[] | undefined>> = [];
  #server: Server | grpc.Server | undefined;
  #url = "";

  /** The base URL an exporter is given (`…:PORT`; it adds /v1/traces). */
  get url(): string {
    return this.#url;
  }

  static async http(): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver();
    const root = new protobuf.Root();
    // Imports are named from the definitions' root, as protoc's include path has them.
    root.resolvePath = (_origin, target) => join(PROTO_DIR, target);
    await root.load([TRACE_PROTO, METRICS_PROTO], { keepCase: false });
    const decoders = {
      "/v1/traces": root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
      "/v1/metrics": root.lookupType("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest"),
    };
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const decoder = decoders[request.url as keyof typeof decoders];
        if (request.method !== "POST" || !decoder) {
          response.writeHead(404).end();
          return;
        }
        const message = decoder.toObject(decoder.decode(Buffer.concat(chunks)), {
          longs: String,
          bytes: Uint8Array,
        }) as Json;
        receiver.headers.push(request.headers);
        if (request.url === "/v1/traces") receiver.spans.push(...spansOf(message));
        else receiver.metrics.push(...metricsOf(message));
        response.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    receiver.#server = server;
    receiver.#url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return receiver;
  }

  /** A receiver of OTLP over gRPC (the collector's TraceService and MetricsService). */
  static async grpc(): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver();
    const definition = await protoLoader.load([TRACE_PROTO, METRICS_PROTO], {
      includeDirs: [PROTO_DIR],
      longs: String,
      bytes: Array,
      keepCase: false,
    });
    type Service = { service: grpc.ServiceDefinition };
    const { collector } = (
      grpc.loadPackageDefinition(definition) as unknown as {
        opentelemetry: {
          proto: {
            collector: {
              trace: { v1: { TraceService: Service } };
              metrics: { v1: { MetricsService: Service } };
            };
          };
        };
      }
    ).opentelemetry.proto;
    const server = new grpc.Server();
    server.addService(collector.trace.v1.TraceService.service, {
      Export: (call: grpc.ServerUnaryCall<Json, Json>, callback: grpc.sendUnaryData<Json>) => {
        receiver.headers.push(call.metadata.getMap() as Record<string, string>);
        receiver.spans.push(...spansOf(withBytes(call.request)));
        callback(null, {});
      },
    });
    server.addService(collector.metrics.v1.MetricsService.service, {
      Export: (call: grpc.ServerUnaryCall<Json, Json>, callback: grpc.sendUnaryData<Json>) => {
        receiver.metrics.push(...metricsOf(call.request));
        callback(null, {});
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    receiver.#server = server;
    receiver.#url = `http://127.0.0.1:${port}`;
    return receiver;
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (server instanceof grpc.Server) server.forceShutdown();
    else await new Promise<void>((resolve) => server?.close(() => resolve()));
  }
}

/** proto-loader gives bytes as arrays of numbers (`bytes: Array`): made Uint8Arrays where ids are. */
function withBytes(request: Json): Json {
  return JSON.parse(JSON.stringify(request), (key, value) =>
    ["traceId", "spanId", "parentSpanId"].includes(key) && Array.isArray(value)
      ? new Uint8Array(value)
      : value,
  );
}
