/* troupe.yaml's `telemetry`: OpenTelemetry traces and metrics of every agent (docs/telemetry.md). */
import { z } from "zod";

export const telemetryConfigSchema = z.strictObject({
  /** Off by default; `TROUPE_TELEMETRY=1` in the environment turns it on too. */
  enabled: z.boolean().default(false),
  /**
   * The collector's base URL (`http://localhost:4318` for HTTP, `http://localhost:4317` for gRPC).
   * Default: `OTEL_EXPORTER_OTLP_ENDPOINT`, else the OTLP default for the protocol.
   */
  endpoint: z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" }).optional(),
  /** Default: `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`. */
  protocol: z.enum(["http/protobuf", "grpc"]).optional(),
  /** Sent with every export; keep secrets in `OTEL_EXPORTER_OTLP_HEADERS` (read too) rather than here. */
  headers: z.record(z.string(), z.string()).default({}),
  /** Default: `OTEL_SERVICE_NAME`, else `troupe`. */
  serviceName: z.string().min(1).optional(),
  /** Prompts, completions, tool arguments and results on the spans, redacted as the events are. */
  captureContent: z.boolean().default(false),
  /** Metrics besides the traces. */
  metrics: z.boolean().default(true),
});
export type TelemetryConfig = z.infer<typeof telemetryConfigSchema>;
