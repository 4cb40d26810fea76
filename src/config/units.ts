import { z } from "zod";

/* Amounts as people write them in troupe.yaml: lengths of time and sizes of storage. */

export const DURATION_UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A length of time as people write one (`90s`, `15m`, `12h`, `7d`; `0` for none), in milliseconds. */
export const durationSchema = z.union([z.literal(0), z.string()]).transform((text, context) => {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(String(text));
  if (text === 0 || text === "0") return 0;
  if (!match) {
    context.addIssue({ code: "custom", message: 'must be a duration such as "90s", "15m", "12h" or "7d"' });
    return z.NEVER;
  }
  return Number(match[1]) * DURATION_UNITS[match[2] as keyof typeof DURATION_UNITS];
});

/** Milliseconds as a number, or a duration as people write one (`5m`): more than none either way. */
export const millisecondsSchema = z.union([z.number(), z.string()]).transform((value, context) => {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(String(value).trim());
  const ms =
    typeof value === "number"
      ? value
      : match
        ? Number(match[1]) * DURATION_UNITS[match[2] as keyof typeof DURATION_UNITS]
        : Number.NaN;
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    context.addIssue({
      code: "custom",
      message: 'must be milliseconds (300000) or a duration such as "5m" or "90s", more than 0',
    });
    return z.NEVER;
  }
  return ms;
});

const SIZE_UNITS = { B: 1, KB: 2 ** 10, MB: 2 ** 20, GB: 2 ** 30, TB: 2 ** 40 } as const;

/** An amount of storage as nats-server's config writes one (`512MB`, `10GB`; units of 1024), in bytes. */
export const sizeSchema = z.union([z.number(), z.string()]).transform((value, context) => {
  const match = /^(\d+)\s*(B|KB|MB|GB|TB)?$/i.exec(String(value).trim());
  const bytes = match
    ? Number(match[1]) * SIZE_UNITS[(match[2]?.toUpperCase() ?? "B") as keyof typeof SIZE_UNITS]
    : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    context.addIssue({ code: "custom", message: 'must be a size such as "512MB" or "10GB"' });
    return z.NEVER;
  }
  return bytes;
});

/** A count of something: a whole number, more than none. */
export const positiveInt = z.number().int().positive();
