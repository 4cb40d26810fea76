import { subjects } from "./subjects.js";

/**
 * Who connects to Troupe's NATS. The daemon hosts runs and serves the API; a worker hosts
 * subagents; a client (`troupe run`, `steer`, `abort`, `status`) starts and commands runs through
 * the API; an approver answers approvals; an observer only watches.
 */
export const ROLES = ["daemon", "worker", "client", "approver", "observer"] as const;
export type Role = (typeof ROLES)[number];

/** Every KV bucket Troupe uses, by its name under the prefix. */
export const KV_BUCKETS = [
  "snapshots",
  "journal",
  "approvals",
  "answers",
  "runs",
  "workers",
  "actors",
] as const;
export type BucketName = (typeof KV_BUCKETS)[number];

/** The API verbs that only read; the observer and approver roles may call these and no other. */
export const READ_VERBS = ["runs.list", "runs.get", "agents.list"] as const;

export interface Permissions {
  publish: { allow: string[]; deny?: string[] };
  subscribe: { allow: string[]; deny?: string[] };
  /** May answer a request it received, on the request's reply subject (nothing else there). */
  allowResponses?: boolean;
}

/**
 * Where one role's replies go (JetStream's too): only that role may subscribe there, and nobody
 * may publish there but the server and whoever answers a request it was sent. With one shared
 * `_INBOX`, any role could read every reply (the daemon's KV reads of snapshots) and forge one.
 */
export const roleInbox = (prefix: string, role: Role) => `_INBOX_${prefix}.${role}`;

/**
 * The NATS subject permissions of each role, for a prefix (docs/nats-permissions.md says why each
 * line is there). Subject permissions cannot look inside a request, so what they cannot say (a
 * consumer's deliver subject, whose key signed an answer) is checked where it is used: NatsBus
 * drops messages a JetStream consumer redirected onto its subscriptions, and the host of an agent
 * verifies each answer's signature before it acts.
 */
export function rolePermissions(role: Role, prefix = "troupe"): Permissions {
  const s = subjects(prefix);
  const kvStream = (name: BucketName) => `KV_${s.bucket(name)}`;
  const kvSubjects = (name: BucketName) => `$KV.${s.bucket(name)}.>`;
  /** Read a stream: look it up, get messages, and ephemeral consumers (ordered or for KV keys and watches). */
  const readStream = (stream: string) => [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.API.CONSUMER.CREATE.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.>`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.>`,
    `$JS.API.CONSUMER.DELETE.${stream}.>`,
  ];
  const readBuckets = (...names: BucketName[]) => names.flatMap((name) => readStream(kvStream(name)));
  const jsBasics = ["$JS.API.INFO", "$JS.FC.>"];
  const inbox = (who: Role) => `${roleInbox(prefix, who)}.>`;
  const events = s.events();
  // Answers are written blind: a role that could read what it wrote could have the server deliver
  // it (a direct get's reply, a consumer's deliver subject) onto any subject, as if a host sent it.
  const writeAnswers = [kvSubjects("answers"), `$JS.API.STREAM.INFO.${kvStream("answers")}`];
  const readVerbs = READ_VERBS.map((verb) => s.api(verb));
  // Nobody but the daemon changes a stream's or a bucket's shape, or removes what is in one.
  const noAdmin = [
    "$JS.API.STREAM.CREATE.>",
    "$JS.API.STREAM.UPDATE.>",
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.CONSUMER.DURABLE.CREATE.>",
  ];
  switch (role) {
    case "daemon":
      return {
        publish: {
          allow: [`${prefix}.>`, "$JS.API.>", "$JS.ACK.>", ...KV_BUCKETS.map(kvSubjects), ...jsBasics],
          // Answers are the approvers' to write.
          deny: [kvSubjects("answers")],
        },
        subscribe: { allow: [`${prefix}.>`, inbox("daemon")] },
        // It answers the API and hosts agents (their control subjects).
        allowResponses: true,
      };
    case "worker":
      return {
        publish: {
          allow: [
            events,
            s.allControls(),
            s.workSpawn(),
            "$JS.ACK.>",
            ...jsBasics,
            ...readStream(s.eventStream),
            ...readBuckets("snapshots", "journal", "approvals", "answers", "workers", "actors"),
            ...(["snapshots", "journal", "workers", "actors"] as const).map(kvSubjects),
          ],
          // It hosts subagents: it neither starts runs, nor asks for approvals, nor answers them.
          deny: [`${prefix}.api.>`, ...noAdmin],
        },
        subscribe: { allow: [events, s.allControls(), s.workSpawn(), inbox("worker")] },
        // It hosts subagents (their control subjects) and takes spawn requests.
        allowResponses: true,
      };
    case "client":
      return {
        publish: {
          allow: [
            `${prefix}.api.>`,
            ...writeAnswers,
            ...jsBasics,
            ...readStream(s.eventStream),
            ...readBuckets("approvals", "workers"),
          ],
          deny: noAdmin,
        },
        subscribe: { allow: [events, s.daemonBeat(), inbox("client")] },
      };
    case "approver":
      return {
        publish: {
          allow: [
            ...readVerbs,
            ...writeAnswers,
            ...jsBasics,
            ...readStream(s.eventStream),
            ...readBuckets("approvals"),
          ],
          deny: noAdmin,
        },
        subscribe: { allow: [events, s.daemonBeat(), inbox("approver")] },
      };
    case "observer":
      return {
        publish: { allow: [...readVerbs, ...jsBasics, ...readStream(s.eventStream)], deny: noAdmin },
        subscribe: { allow: [events, s.daemonBeat(), inbox("observer")] },
      };
  }
}

/** One user of a nats-server config: an nkey (public key) or a user and password. */
export type ServerUser = { role: Role } & ({ nkey: string } | { user: string; password: string });

/** A nats-server `authorization` block for users of these roles. */
export function authorizationBlock(users: ServerUser[], prefix = "troupe"): string {
  const list = (items: string[]) => `[${items.map((item) => JSON.stringify(item)).join(", ")}]`;
  const rule = (rule: { allow: string[]; deny?: string[] }) =>
    `{ allow: ${list(rule.allow)}${rule.deny ? `, deny: ${list(rule.deny)}` : ""} }`;
  const lines = users.map((entry) => {
    const p = rolePermissions(entry.role, prefix);
    const who =
      "nkey" in entry
        ? `nkey: ${JSON.stringify(entry.nkey)}`
        : `user: ${JSON.stringify(entry.user)}, password: ${JSON.stringify(entry.password)}`;
    const responses = p.allowResponses ? ", allow_responses: true" : "";
    return `    # ${entry.role}\n    { ${who}, permissions: { publish: ${rule(p.publish)}, subscribe: ${rule(p.subscribe)}${responses} } }`;
  });
  return `authorization {\n  users = [\n${lines.join("\n")}\n  ]\n}\n`;
}
