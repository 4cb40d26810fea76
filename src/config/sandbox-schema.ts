/* troupe.yaml's `sandbox`: where commands run, and what they may reach from there. */
import { z } from "zod";
import { sandboxModeSchema } from "./policy-schemas.js";

/** YAML 1.2 reads `on` and `off` as words: both they and booleans say whether something is on. */
const onOff = z.preprocess(
  (value) => (value === "on" ? true : value === "off" ? false : value),
  z.boolean({ error: "must be on or off" }),
);

const sandboxObjectSchema = z.strictObject({
  /** Where commands run; absent: the approval policy's own (never-ask read-only, auto-edit and ask workspace-write, yolo off). */
  mode: sandboxModeSchema.optional(),
  /** Commands reach the network without asking. */
  network: onOff.default(false),
  /** More paths mounted read-only in the sandbox (a toolchain outside /usr and /opt); relative to this file. */
  readPaths: z.array(z.string().min(1)).default([]),
  /** The file tools read a file that has other hard links (one may be outside the workspace). */
  readHardLinks: z.boolean().default(false),
});

/** `sandbox: read-only` is short for `sandbox: { mode: read-only }`. */
export const sandboxConfigSchema = z.preprocess(
  (value) => (typeof value === "string" ? { mode: value } : value),
  sandboxObjectSchema,
);
export type SandboxConfig = z.infer<typeof sandboxConfigSchema>;
