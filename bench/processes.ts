/** The child processes of the bench: stopped by their pid, and measurements run in a process of their own. */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** Ends a child with `signal` and waits for it to exit (at once when it has exited already). */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once("exit", done));
  child.kill(signal);
  await exited;
}

/**
 * A measurement in a fresh process with --expose-gc: memory a process has freed stays in its RSS,
 * so after other measurements a growth would read low. `moduleUrl` is a bench file that measures
 * when run as a script (`whenRunAsScript`) and prints one JSON result.
 */
export async function measureApart<T>(moduleUrl: string, args: string[]): Promise<T> {
  const child = spawn(process.execPath, ["--expose-gc", fileURLToPath(moduleUrl), ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  const code = await new Promise((done) => child.once("exit", done));
  if (code !== 0) throw new Error(`${fileURLToPath(moduleUrl)} ${args.join(" ")} exited with ${code}`);
  return JSON.parse(out) as T;
}

/** When `moduleUrl` is the script node runs: measures with its arguments and prints the result. */
export async function whenRunAsScript(
  moduleUrl: string,
  measure: (args: string[]) => Promise<unknown>,
): Promise<void> {
  if (process.argv[1] !== fileURLToPath(moduleUrl)) return;
  process.stdout.write(`${JSON.stringify(await measure(process.argv.slice(2)))}\n`);
}
