import { spawn } from "node:child_process";
import { z } from "zod";
import { analyzeCommand } from "../../safety/command-analysis.js";
import { defineTool, type Tool, toolError } from "../tool.js";

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
/** Raw output kept while a command runs; the pipeline then caps what the model sees. */
const RAW_CAP = 1024 * 1024;

/**
 * The environment a command runs with: an allow-list of the parent's variables (plus LC_*), and
 * `extra` names given in config. A name like *KEY*, *TOKEN*, *SECRET* or *PASSWORD* passes only
 * when `extra` names it.
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

export interface ShellToolOptions {
  /** Variable names passed on besides the defaults. */
  env?: readonly string[];
  parentEnv?: NodeJS.ProcessEnv;
}

export function shellTool(options: ShellToolOptions = {}): Tool {
  return defineTool({
    name: "shell",
    description:
      "Run a bash command in the workspace directory and return its output (stdout and stderr) and exit code. Prefer the file tools for reading and editing files.",
    effect: "execute",
    parameters: z.object({
      command: z.string().min(1),
      timeout_ms: z.number().int().min(100).max(600_000).default(120_000),
    }),
    timeoutMs: 610_000,
    readMore: "redirect the output to a file and read it with read_file, or narrow the command",
    judge({ command }, workspace) {
      const analysis = analyzeCommand(command, workspace);
      return {
        safe: analysis.safe,
        understood: analysis.parsed,
        ...(analysis.dangerous ? { dangerous: analysis.dangerous } : {}),
        ...(analysis.unsafeBecause ? { reason: analysis.unsafeBecause } : {}),
      };
    },
    preview({ command }, { workspace }) {
      return { detail: command, paths: analyzeCommand(command, workspace).paths };
    },
    execute({ command, timeout_ms }, { workspace, signal }) {
      return new Promise((resolve) => {
        const child = spawn("bash", ["-c", command], {
          cwd: workspace,
          env: commandEnv(options.parentEnv ?? process.env, options.env),
          // Its own process group, so a timeout or an abort ends everything it started.
          detached: true,
          stdio: ["ignore", "pipe", "pipe"],
        });
        let output = "";
        let dropped = 0;
        const collect = (chunk: Buffer) => {
          if (output.length < RAW_CAP) output += chunk.toString("utf8");
          else dropped += chunk.length;
        };
        child.stdout.on("data", collect);
        child.stderr.on("data", collect);
        let ended: "timeout" | "aborted" | undefined;
        const killGroup = (why: "timeout" | "aborted") => {
          ended ??= why;
          try {
            if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
          } catch {}
        };
        const timer = setTimeout(() => killGroup("timeout"), timeout_ms);
        const onAbort = () => killGroup("aborted");
        signal.addEventListener("abort", onAbort, { once: true });
        child.once("error", (error) => {
          clearTimeout(timer);
          resolve(toolError(`could not start bash: ${error.message}`, "check that bash is installed"));
        });
        child.once("close", (code, killedBy) => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
          const more = dropped > 0 ? `\n[${dropped} more bytes of output were dropped]` : "";
          const text = `${output}${more}`;
          if (ended === "timeout") {
            resolve({
              ...toolError(
                `the command timed out after ${timeout_ms} ms and was killed`,
                "run it with a larger timeout_ms, or make it faster",
              ),
              output: text,
            });
          } else if (ended === "aborted") {
            resolve({
              ...toolError("the command was cancelled", "run it again if it is still needed"),
              output: text,
            });
          } else if (code === 0) {
            resolve({ ok: true, output: text || "(no output)" });
          } else {
            const status = code === null ? `killed by ${killedBy}` : `exit code ${code}`;
            resolve({
              ...toolError(
                `the command failed (${status})`,
                "read the output above, fix the cause and try again",
              ),
              output: text,
            });
          }
        });
      });
    },
  }) as Tool;
}
