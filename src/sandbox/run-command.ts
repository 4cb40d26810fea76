import { spawn } from "node:child_process";

export interface CommandSpec {
  file: string;
  args: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Written to the command's stdin, which is then closed; without it stdin is /dev/null. */
  stdin?: string;
  /** Characters of output kept; what comes after is counted, not kept. Default 1 MiB. */
  outputCap?: number;
  /** Written to file descriptors 3, 4, … of the command, each then closed (bubblewrap's seccomp filter). */
  inputs?: readonly Buffer[];
}

export interface CommandOutcome {
  /** The exit code; null when a signal ended it. */
  code: number | null;
  killedBy: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout and stderr as they came, interleaved. */
  output: string;
  /** Bytes of output past the cap. */
  dropped: number;
  /** Set when Troupe ended it. */
  ended?: "timeout" | "aborted";
  /** Set when it could not start. */
  startError?: Error;
}

const DEFAULT_CAP = 1024 * 1024;

/**
 * Runs one command in a process group of its own, so a timeout or an abort ends everything it
 * started (SIGKILL to the group). Never rejects: what happened is in the outcome.
 */
export function runCommand(spec: CommandSpec): Promise<CommandOutcome> {
  const cap = spec.outputCap ?? DEFAULT_CAP;
  const inputs = spec.inputs ?? [];
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(spec.file, spec.args, {
        cwd: spec.cwd,
        env: spec.env,
        detached: true,
        stdio: [
          spec.stdin === undefined ? "ignore" : "pipe",
          "pipe",
          "pipe",
          ...inputs.map(() => "pipe" as const),
        ],
      });
    } catch (error) {
      // Too many arguments (E2BIG) and the like throw here rather than emit "error".
      resolve({
        code: null,
        killedBy: null,
        stdout: "",
        stderr: "",
        output: "",
        dropped: 0,
        startError: error as Error,
      });
      return;
    }
    inputs.forEach((data, i) => {
      const stream = child.stdio[3 + i] as NodeJS.WritableStream & {
        on(event: "error", f: () => void): void;
      };
      stream.on("error", () => {});
      stream.end(data);
    });
    let stdout = "";
    let stderr = "";
    let output = "";
    let dropped = 0;
    const collect = (stream: "stdout" | "stderr") => (chunk: Buffer) => {
      if (output.length >= cap) {
        dropped += chunk.length;
        return;
      }
      const text = chunk.toString("utf8");
      output += text;
      if (stream === "stdout") stdout += text;
      else stderr += text;
    };
    child.stdout?.on("data", collect("stdout"));
    child.stderr?.on("data", collect("stderr"));
    let ended: CommandOutcome["ended"];
    const killGroup = (why: "timeout" | "aborted") => {
      ended ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {}
    };
    const timer = setTimeout(() => killGroup("timeout"), spec.timeoutMs);
    const onAbort = () => killGroup("aborted");
    if (spec.signal?.aborted) onAbort();
    else spec.signal?.addEventListener("abort", onAbort, { once: true });
    const done = (outcome: Pick<CommandOutcome, "code" | "killedBy" | "startError">) => {
      clearTimeout(timer);
      spec.signal?.removeEventListener("abort", onAbort);
      resolve({ ...outcome, stdout, stderr, output, dropped, ...(ended ? { ended } : {}) });
    };
    child.once("error", (error) => done({ code: null, killedBy: null, startError: error }));
    child.once("close", (code, killedBy) => done({ code, killedBy }));
    if (spec.stdin !== undefined) {
      child.stdin?.on("error", () => {});
      child.stdin?.end(spec.stdin);
    }
  });
}
