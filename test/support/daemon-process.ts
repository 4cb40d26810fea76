import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, expect } from "vitest";
import { TROUPE_BIN, tempTree } from "./cli.js";
import { waitFor } from "./wait.js";

/**
 * `troupe daemon` and other troupe processes as a user starts them, each stopped (SIGKILL) and its
 * project dir removed after the test. Call once at a test file's top level.
 */
export function daemonProcesses() {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A project dir whose config uses its own prefix (and `yaml` besides), and a daemon started on it. */
  async function startDaemon(
    env: NodeJS.ProcessEnv,
    prefix: string,
    tools = "tools: [read_file]",
    yaml = "",
  ) {
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\n${yaml}`,
      "config/agents/worker.yaml": `name: worker\ndescription: Works.\n${tools}\n`,
      "notes.txt": "daemon notes\n",
    });
    cleanups.push(dispose);
    const daemon = spawn(process.execPath, [TROUPE_BIN, "--config", join(dir, "config"), "daemon"], {
      cwd: dir,
      env: { ...process.env, TROUPE_DATA_DIR: join(dir, ".data"), ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    daemon.stderr?.on("data", (chunk) => (stderr += chunk));
    cleanups.push(() => {
      daemon.kill("SIGKILL");
      // No promise of the daemon's was left rejected with no one to catch it (src/cli/unhandled.ts).
      expect(stderr).not.toContain("unhandled rejection");
    });
    await waitFor("the daemon to be ready", () => stderr.includes("troupe daemon ready"), 15_000);
    return { dir, daemon, stderr: () => stderr };
  }

  /** A process left running (troupe's own when `command` is omitted): its output so far, and its exit code once it ends. */
  function follow(args: string[], cwd: string, env: NodeJS.ProcessEnv, command: string[] = [TROUPE_BIN]) {
    const child = spawn(process.execPath, [...command, ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    cleanups.push(() => void child.kill("SIGKILL"));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    return { child, exit: exited(child), stdout: () => stdout, stderr: () => stderr };
  }

  return { cleanups, startDaemon, follow };
}

export function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", (code) => resolve(code)),
  );
}
