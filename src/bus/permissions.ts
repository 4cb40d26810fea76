import { subjects } from "./subjects.js";

export type Role = "daemon" | "worker" | "observer" | "approver";

/** Every KV bucket Troupe uses, by its name under the prefix. */
export const KV_BUCKETS = ["snapshots", "journal", "approvals", "runs", "workers", "actors"] as const;

export interface Permissions {
  publish: { allow: string[]; deny?: string[] };
  subscribe: { allow: string[] };
}

/**
 * The NATS subject permissions of each role, for a prefix. The daemon and workers may do anything
 * under their prefix; an observer may only read the event log; an approver may also read and answer
 * approvals (KV bucket `<p>_approvals`). Paste them into a nats-server config (docs/nats-permissions.md).
 */
export function rolePermissions(role: Role, prefix = "troupe"): Permissions {
  const s = subjects(prefix);
  const stream = s.eventStream;
  // Subject wildcards are whole tokens, so each bucket is named.
  const buckets = KV_BUCKETS.map((name) => `$KV.${s.bucket(name)}.>`);
  const everything: Permissions = {
    publish: { allow: [`${prefix}.>`, "$JS.API.>", ...buckets, "$JS.ACK.>", "_INBOX.>"] },
    subscribe: { allow: [`${prefix}.>`, "_INBOX.>", ...buckets] },
  };
  const readLog: Permissions = {
    publish: {
      allow: [
        "$JS.API.INFO",
        `$JS.API.STREAM.INFO.${stream}`,
        `$JS.API.CONSUMER.CREATE.${stream}.>`,
        `$JS.API.CONSUMER.INFO.${stream}.>`,
        `$JS.API.CONSUMER.MSG.NEXT.${stream}.>`,
        `$JS.API.CONSUMER.DELETE.${stream}.>`,
      ],
      deny: [`${prefix}.ctl.>`, `${prefix}.approval.>`, `${prefix}.api.runs.start`, `$KV.>`],
    },
    subscribe: { allow: [s.events(), "_INBOX.>"] },
  };
  switch (role) {
    case "daemon":
    case "worker":
      return everything;
    case "observer":
      return readLog;
    case "approver": {
      const bucket = `KV_${s.bucket("approvals")}`;
      return {
        publish: {
          allow: [
            ...readLog.publish.allow,
            `$JS.API.STREAM.INFO.${bucket}`,
            `$JS.API.STREAM.MSG.GET.${bucket}`,
            `$JS.API.DIRECT.GET.${bucket}.>`,
            `$JS.API.CONSUMER.CREATE.${bucket}.>`,
            `$JS.API.CONSUMER.MSG.NEXT.${bucket}.>`,
            `$JS.API.CONSUMER.DELETE.${bucket}.>`,
            `$KV.${s.bucket("approvals")}.>`,
          ],
          deny: [`${prefix}.ctl.>`, `${prefix}.api.runs.start`],
        },
        subscribe: { allow: [s.events(), "_INBOX.>"] },
      };
    }
  }
}

/** A nats-server `authorization` block for users of these roles (passwords given by the caller). */
export function authorizationBlock(
  users: Array<{ user: string; password: string; role: Role }>,
  prefix = "troupe",
): string {
  const lines = users.map(({ user, password, role }) => {
    const p = rolePermissions(role, prefix);
    const list = (items: string[]) => `[${items.map((item) => JSON.stringify(item)).join(", ")}]`;
    const publish = `{ allow: ${list(p.publish.allow)}${p.publish.deny ? `, deny: ${list(p.publish.deny)}` : ""} }`;
    return `    { user: ${JSON.stringify(user)}, password: ${JSON.stringify(password)}, permissions: { publish: ${publish}, subscribe: { allow: ${list(p.subscribe.allow)} } } }`;
  });
  return `authorization {\n  users = [\n${lines.join("\n")}\n  ]\n}\n`;
}
