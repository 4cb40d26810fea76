import { type ChildProcess, type SpawnOptions, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const TROUPE_BIN = resolve(dirname(fileURLToPath(import.meta.url)), "../../bin/troupe.js");

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built `troupe` as a user would, in `cwd`, with a private data dir and no inherited config
 * or NATS_URL (a test that means the shared server passes it, with a prefix of its own in the config).
 */
export function runTroupe(
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TROUPE_DATA_DIR: join(options.cwd, ".data"),
    ...options.env,
  };
  for (const name of ["TROUPE_CONFIG", "NATS_URL"]) {
    delete env[name];
    if (options.env?.[name]) env[name] = options.env[name];
  }
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [TROUPE_BIN, ...args], {
      cwd: options.cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.once("error", reject);
    child.once("close", (code) => resolvePromise({ code, stdout, stderr }));
  });
}

/**
 * A temporary directory with the given files (paths relative to it); removed by `dispose`. With
 * `trusted`, its `config/` is trusted as a user trusts it (`troupe trust`): the test runs troupe
 * there and means that config to be found.
 */
export function tempTree(
  files: Record<string, string>,
  options: { trusted?: boolean } = {},
): { dir: string; dispose: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "troupe-test-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  if (options.trusted) trustConfig(dir);
  return { dir, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * `troupe trust config` in `cwd`, through the built CLI, with this test file's HOME (where the
 * trust records are kept): what a user does once they have looked at the config troupe will find
 * there, and again after changing it.
 */
export function trustConfig(cwd: string, env: NodeJS.ProcessEnv = {}): void {
  const result = spawnSync(process.execPath, [TROUPE_BIN, "trust", "config"], {
    cwd,
    env: { ...process.env, ...env },
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(`troupe trust config in ${cwd}: ${result.stderr}`);
}

/**
 * An environment without NATS_URL (CI sets it to the shared server), for a test whose troupe.yaml
 * names a server of its own: the variable would win over the file.
 */
export function withoutNatsUrl(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { NATS_URL: _ignored, ...rest } = env;
  return rest;
}

/** A troupe process left running (a daemon, a client that follows): its output so far, and its exit. */
export interface RunningTroupe {
  child: ChildProcess;
  exit: Promise<number | null>;
  stdout(): string;
  stderr(): string;
}

/** Starts a command as child_process.spawn does, perhaps elsewhere; the pid is the command's own. */
export type Launch = (command: string, args: string[], options: SpawnOptions) => ChildProcess;

/**
 * Starts `troupe ARGS` in `cwd` with exactly `env`; the caller ends it. `launch` starts it elsewhere
 * (on a host of test/support/hosts.ts); it must keep the pid the process's own.
 */
export function spawnTroupe(
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; launch?: Launch },
): RunningTroupe {
  const launch = options.launch ?? spawn;
  const child = launch(process.execPath, [TROUPE_BIN, ...args], {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk) => (stdout += chunk));
  child.stderr?.on("data", (chunk) => (stderr += chunk));
  return { child, exit: exited(child), stdout: () => stdout, stderr: () => stderr };
}

export function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", (code) => resolve(code)),
  );
}

/**
 * `troupe ARGS` on a terminal (util-linux `script` gives it a pty of 120×40): what is written to its
 * stdin is typed, and `output()` is what the terminal was sent. The caller ends it.
 */
export function onTerminal(args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  const command = [process.execPath, TROUPE_BIN, ...args].map((word) => `'${word}'`).join(" ");
  const child = spawn("script", ["-qfec", command, "/dev/null"], {
    cwd: options.cwd,
    env: { ...options.env, COLUMNS: "120", LINES: "40" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  return { child, exit: exited(child), output: () => output };
}

/** `troupe worker`'s command line (after node) for a config dir, beating and judging others as told. */
export function workerArgs(
  configDir: string,
  timing: { heartbeatMs: number; deadAfterMs: number },
): string[] {
  return [
    TROUPE_BIN,
    "--config",
    configDir,
    "worker",
    "--heartbeat-ms",
    String(timing.heartbeatMs),
    "--dead-after-ms",
    String(timing.deadAfterMs),
  ];
}
