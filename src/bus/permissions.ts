import { type Role, VIEWS } from "../config/roles.js";
import { subjects } from "./subjects.js";

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

/**
 * The buckets the people's account (below) has read-only copies of: what a client, an approver or
 * an observer reads besides the event log. The answers bucket is written blind, never read.
 */
export const USER_READ_BUCKETS = ["approvals", "workers"] as const satisfies readonly BucketName[];

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
export const roleInbox = (prefix: string, role: Role | typeof VIEWS) => `_INBOX_${prefix}.${role}`;

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
  // (The stream's info is for a one-account server, where the library opens the bucket first.)
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

/** A nats-server `authorization` block for users of these roles (one account: no copies, no imports). */
export function authorizationBlock(users: ServerUser[], prefix = "troupe"): string {
  const lines = users.map((entry) => userLine(entry, rolePermissions(entry.role, prefix)));
  return `authorization {\n  users = [\n${lines.join("\n")}\n  ]\n}\n`;
}

function userLine(
  entry: { role: string } & ({ nkey: string } | { user: string; password: string }),
  p: Permissions,
): string {
  const list = (items: string[]) => `[${items.map((item) => JSON.stringify(item)).join(", ")}]`;
  const rule = (rule: { allow: string[]; deny?: string[] }) =>
    `{ allow: ${list(rule.allow)}${rule.deny ? `, deny: ${list(rule.deny)}` : ""} }`;
  const who =
    "nkey" in entry
      ? `nkey: ${JSON.stringify(entry.nkey)}`
      : `user: ${JSON.stringify(entry.user)}, password: ${JSON.stringify(entry.password)}`;
  const responses = p.allowResponses ? ", allow_responses: true" : "";
  return `      # ${entry.role}\n      { ${who}, permissions: { publish: ${rule(p.publish)}, subscribe: ${rule(p.subscribe)}${responses} } }`;
}

/**
 * The two accounts of a server Troupe configures. `hosts` holds every stream and bucket, and only
 * the daemon and workers log into it. `users` holds the client, approver and observer: they reach
 * the API and the live events through imports, write answers through an import of the answers
 * bucket's subjects, and read the event log and the buckets they need from read-only copies in
 * their own account (mirrors, which take no messages on any subject). So a subject a person's role
 * names, as a reply subject or a consumer's deliver subject, lands in the people's account, where no
 * stream stores it: nothing it sends that way is written into Troupe's state.
 */
export function accountNames(prefix = "troupe"): { hosts: string; users: string } {
  return { hosts: `${prefix}_hosts`, users: `${prefix}_users` };
}

/** The streams the people's account has copies of, by the same names as in the hosts' account. */
export function mirroredStreams(prefix = "troupe"): string[] {
  const s = subjects(prefix);
  return [s.eventStream, ...USER_READ_BUCKETS.map((name) => `KV_${s.bucket(name)}`)];
}

/** How a copy in the people's account reaches its stream in the hosts' account. */
export function mirrorSource(prefix = "troupe"): { api: string; deliver: (stream: string) => string } {
  const { hosts } = accountNames(prefix);
  return { api: `$JS.${hosts}.API`, deliver: (stream) => `_MIRROR_${prefix}.${stream}` };
}

export function viewsPermissions(prefix = "troupe"): Permissions {
  const admin = mirroredStreams(prefix).flatMap((stream) => [
    ...["INFO", "CREATE", "UPDATE", "DELETE"].map((verb) => `$JS.API.STREAM.${verb}.${stream}`),
    // The durable consumers a reader's seed left on a copy: listed and removed at each start.
    `$JS.API.CONSUMER.LIST.${stream}`,
    `$JS.API.CONSUMER.DELETE.${stream}.>`,
  ]);
  return {
    publish: { allow: ["$JS.API.INFO", ...admin] },
    subscribe: { allow: [`${roleInbox(prefix, VIEWS)}.>`] },
  };
}

/**
 * A nats-server `accounts` block for users of these roles, in the two accounts of `accountNames`,
 * with the imports and exports between them, and the daemon's identity that makes the copies.
 */
export function accountsBlock(users: ServerUser[], viewsNkey: string, prefix = "troupe"): string {
  const s = subjects(prefix);
  const { hosts, users: people } = accountNames(prefix);
  const source = mirrorSource(prefix);
  const answers = `$KV.${s.bucket("answers")}.>`;
  const mirrored = mirroredStreams(prefix);
  const exports: Array<{ kind: "service" | "stream"; subject: string; to?: string }> = [
    { kind: "service", subject: `${prefix}.api.>` },
    { kind: "stream", subject: s.events() },
    { kind: "stream", subject: s.daemonBeat() },
    { kind: "service", subject: answers },
    ...mirrored.flatMap((stream) => [
      {
        kind: "service" as const,
        subject: `$JS.API.CONSUMER.CREATE.${stream}`,
        to: `${source.api}.CONSUMER.CREATE.${stream}`,
      },
      { kind: "service" as const, subject: `$JS.FC.${stream}.>` },
      { kind: "stream" as const, subject: `${source.deliver(stream)}.>` },
    ]),
  ];
  const q = JSON.stringify;
  const exportLines = exports.map((e) => `      { ${e.kind}: ${q(e.subject)} }`);
  const importLines = exports.map(
    (e) =>
      `      { ${e.kind}: { account: ${q(hosts)}, subject: ${q(e.subject)} }${e.to ? `, to: ${q(e.to)}` : ""} }`,
  );
  const usersOf = (roles: readonly Role[]) =>
    users
      .filter((user) => roles.includes(user.role))
      .map((user) => userLine(user, rolePermissions(user.role, prefix)));
  const views = userLine({ role: VIEWS, nkey: viewsNkey }, viewsPermissions(prefix));
  return `accounts {
  ${q(hosts)}: {
    jetstream: enabled
    users = [
${usersOf(["daemon", "worker"]).join("\n")}
    ]
    exports = [
${exportLines.join("\n")}
    ]
  }
  ${q(people)}: {
    jetstream: enabled
    users = [
${[...usersOf(["client", "approver", "observer"]), views].join("\n")}
    ]
    imports = [
${importLines.join("\n")}
    ]
  }
}
`;
}
