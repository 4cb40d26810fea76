import { SANDBOX_HOME } from "./host-plan.js";

/** Variables a command gets by default; nothing else of the parent's environment passes. */
const BASE_ENV = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TERM",
  "TZ",
  "TMPDIR",
  "PWD",
  "NODE_ENV",
  "CI",
];
const SECRET_LIKE = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

/**
 * The environment a command Troupe spawns runs with, built rather than inherited: an allow-list of
 * the parent's variables (plus LC_*), and `extra` names given in config. A name like *KEY*,
 * *TOKEN*, *SECRET* or *PASSWORD* passes only when `extra` names it.
 */
export function commandEnv(parent: NodeJS.ProcessEnv, extra: readonly string[] = []): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue;
    const allowed = BASE_ENV.includes(name) || name.startsWith("LC_");
    if ((allowed && !SECRET_LIKE.test(name)) || extra.includes(name)) env[name] = value;
  }
  return env;
}

/**
 * The environment of a sandboxed command: as `commandEnv`, with the sandbox's private HOME and
 * /tmp, and bash as the shell. bubblewrap itself is started with it too, since inside the sandbox
 * its process is the one a command sees as /proc/1.
 */
export function sandboxEnv(
  parent: NodeJS.ProcessEnv,
  extra: readonly string[] = [],
  cwd?: string,
): NodeJS.ProcessEnv {
  return {
    ...commandEnv(parent, extra),
    HOME: SANDBOX_HOME,
    TMPDIR: "/tmp",
    SHELL: "/bin/bash",
    ...(cwd ? { PWD: cwd } : {}),
  };
}
