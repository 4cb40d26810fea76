import type { Role } from "../config/roles.js";
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
 * The buckets the people's account (below) may read by gets: what a client, an approver or an
 * observer reads besides the event log. The answers bucket is written blind, never read.
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
export const roleInbox = (prefix: string, role: Role) => `_INBOX_${prefix}.${role}`;

/**
 * A stream's JetStream API that only answers the asker, in JSON of the API's own: its info and its
 * gets, by sequence or subject. Not a direct get, nor a consumer: those send the stored message
 * itself, headers and all, to a subject the asker names, and a stored `Nats-Request-Info` header
 * sent onto `$JS.API.…` of an account with JetStream is carried out as that account's request.
 */
function readByGets(stream: string, api = "$JS.API"): string[] {
  return [`${api}.STREAM.INFO.${stream}`, `${api}.STREAM.MSG.GET.${stream}`];
}

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
  // Every role but the daemon reads by gets only (readByGets says why): on a server of one account
  // the streams' own API; with Troupe's two, a person's role reaches the hosts' through its import.
  const getFrom = (...streams: string[]) => streams.flatMap((stream) => readByGets(stream));
  const peopleGetFrom = (...streams: string[]) =>
    streams.flatMap((stream) => [...readByGets(stream), ...readByGets(stream, hostsApiPrefix(prefix))]);
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
            // Its events and aborts are marked as a worker's: readers drop its events of a run's
            // first agent, and that agent's host its aborts; it may neither steer nor follow up.
            ...s.workerEvents(),
            s.workerAborts(),
            s.workSpawn(),
            ...getFrom(s.eventStream),
            ...(["snapshots", "journal", "approvals", "answers", "workers", "actors"] as const).flatMap(
              (name) => getFrom(kvStream(name)),
            ),
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
            ...peopleGetFrom(s.eventStream, kvStream("approvals"), kvStream("workers")),
          ],
          deny: noAdmin,
        },
        subscribe: { allow: [events, s.daemonBeat(), inbox("client")] },
      };
    case "approver":
      return {
        publish: {
          allow: [...readVerbs, ...writeAnswers, ...peopleGetFrom(s.eventStream, kvStream("approvals"))],
          deny: noAdmin,
        },
        subscribe: { allow: [events, s.daemonBeat(), inbox("approver")] },
      };
    case "observer":
      return {
        publish: { allow: [...readVerbs, ...peopleGetFrom(s.eventStream)], deny: noAdmin },
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
 * the daemon and workers log into it. `users` holds the client, approver and observer, and has no
 * JetStream of its own: they reach the API and the live events through imports, write answers
 * through an import of the answers bucket's subjects, and read the event log and the buckets they
 * need through imports of those streams' info and gets. A service's answer goes back to the asker's
 * account, so whatever subject a person's role names as a reply subject is a subject of the people's
 * account, where no stream stores it and no JetStream API takes it as a request; and it may make no
 * consumer, whose deliver subject would be one of the hosts' account.
 */
export function accountNames(prefix = "troupe"): { hosts: string; users: string } {
  return { hosts: `${prefix}_hosts`, users: `${prefix}_users` };
}

/** Where the people's account reaches the hosts' streams' info and gets: `$JS.<hosts>.API`. */
export function hostsApiPrefix(prefix = "troupe"): string {
  return `$JS.${accountNames(prefix).hosts}.API`;
}

/** The streams the people's account reads by gets: the event log and the buckets people read. */
export function peopleReadStreams(prefix = "troupe"): string[] {
  const s = subjects(prefix);
  return [s.eventStream, ...USER_READ_BUCKETS.map((name) => `KV_${s.bucket(name)}`)];
}

/**
 * A nats-server `accounts` block for users of these roles, in the two accounts of `accountNames`,
 * with the exports of the hosts' account and the people's imports of them.
 */
export function accountsBlock(users: ServerUser[], prefix = "troupe"): string {
  const s = subjects(prefix);
  const { hosts, users: people } = accountNames(prefix);
  // The people's account answers `$JS.API.…` itself ("JetStream not enabled"): the hosts' streams'
  // gets are imported under the hosts' API prefix instead (`hostsApiPrefix`).
  const hostsApi = hostsApiPrefix(prefix);
  const exports: Array<{ kind: "service" | "stream"; subject: string; to?: string }> = [
    { kind: "service", subject: `${prefix}.api.>` },
    { kind: "stream", subject: s.events() },
    { kind: "stream", subject: s.daemonBeat() },
    { kind: "service", subject: `$KV.${s.bucket("answers")}.>` },
    ...peopleReadStreams(prefix).flatMap((stream) =>
      readByGets(stream).map((subject) => ({
        kind: "service" as const,
        subject,
        to: subject.replace("$JS.API", hostsApi),
      })),
    ),
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
    users = [
${usersOf(["client", "approver", "observer"]).join("\n")}
    ]
    imports = [
${importLines.join("\n")}
    ]
  }
}
`;
}
