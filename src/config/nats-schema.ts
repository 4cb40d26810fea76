/* troupe.yaml's `nats`: how to reach the server, as whom, and how the event stream and buckets are kept. */
import { z } from "zod";
import { ROLES } from "./roles.js";
import { durationSchema, sizeSchema } from "./units.js";

export const natsConfigSchema = z.strictObject({
  /** One URL or several, comma-separated: the first is used while it answers, the next when it does not. */
  url: z.string().min(1).default("nats://127.0.0.1:4222"),
  /** Prefix of every subject, stream and bucket; lets several Troupes share one server. */
  prefix: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9_-]{0,31}$/, 'must be a letter then up to 31 letters, digits, "_" or "-"')
    .default("troupe"),
  user: z.string().optional(),
  /** Prefer `passwordEnv` to keeping a secret in the file. */
  password: z.string().optional(),
  passwordEnv: z.string().optional(),
  token: z.string().optional(),
  tokenEnv: z.string().optional(),
  nkeySeedFile: z.string().optional(),
  credsFile: z.string().optional(),
  /**
   * The role the credentials above are of (`troupe credentials ROLE` prints one's seed): replies
   * come to that role's inbox, the only one it may read. Default: the command's own.
   */
  role: z.enum(ROLES).optional(),
  tls: z
    .strictObject({
      caFile: z.string().optional(),
      certFile: z.string().optional(),
      keyFile: z.string().optional(),
    })
    .optional(),
  /** When nothing answers at `url` and nats-server is on PATH, start one as a child. */
  embedded: z.boolean().default(true),
  /**
   * The event stream (`<PREFIX>_EVENTS`), as the daemon makes it, or changes it to when it exists
   * (a setting left out leaves the stream's own). Absent: at most 10,000,000 events (the oldest go),
   * no age limit, one replica, on file.
   */
  stream: z
    .strictObject({
      /** Events older than this are removed; `0`: kept. */
      maxAge: durationSchema.optional(),
      /** The oldest events are removed past this size. */
      maxBytes: sizeSchema.optional(),
      /** The oldest events are removed past this many (default `EVENT_STREAM_ENTRIES`). */
      maxEntries: z.number().int().min(1000).optional(),
      /** Copies kept on a NATS cluster (1 to 5). */
      replicas: z.number().int().min(1).max(5).optional(),
      storage: z.enum(["file", "memory"]).optional(),
    })
    .optional(),
  /** Every KV bucket (`<prefix>_*`), as the daemon makes or changes them. */
  kv: z
    .strictObject({
      replicas: z.number().int().min(1).max(5).optional(),
      /** The most keys a bucket holds (each has its default: docs/nats-permissions.md); past it, a new key is refused. */
      maxEntries: z.number().int().min(100).optional(),
      /** How long a finished run's record stays in `<prefix>_runs`; absent or `0`: for good. */
      ttl: durationSchema.optional(),
    })
    .optional(),
});
export type NatsConfig = z.infer<typeof natsConfigSchema>;
export type StreamSettings = NonNullable<NatsConfig["stream"]>;
export type KvSettings = NonNullable<NatsConfig["kv"]>;
