/**
 * What the command sandbox costs. A `shell` call of `true` through the tool's `execute`: unconfined
 * (`off`), and under bubblewrap `read-only` and `workspace-write`, in a small project and in a tree
 * of 1,000 directories (every plan walks the workspace for `.git`, `.troupe` and sockets, and a
 * workspace-write command's settle walks it again; a directory is read again only when it changed).
 * Beside it, Troupe's own part alone (plan and settle, warm and first), and what a hook's hermetic
 * start (`bash --noprofile --norc -c`) costs against a plain `bash -c`. The variants of each group
 * take turns round by round, so the VM's drift weighs on all alike. Run in a process of its own:
 * what a fork costs grows with the forking process.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "../src/log.js";
import { Redactor } from "../src/safety/redact.js";
import { commandEnv } from "../src/sandbox/env.js";
import { HostPlanner, type HostPlanRequest } from "../src/sandbox/host-plan.js";
import type { Confinement } from "../src/sandbox/plan.js";
import { runCommand } from "../src/sandbox/run-command.js";
import { detectSandbox } from "../src/sandbox/sandbox.js";
import { shellTool } from "../src/tools/builtin/shell.js";
import { CommandHooks } from "../src/tools/command-hooks.js";
import type { PlannedCall } from "../src/tools/plan.js";
import { measureApart, whenRunAsScript } from "./processes.js";

/** Median and 90th percentile of one variant's calls, ms. */
export interface Timing {
  name: string;
  medianMs: number;
  p90Ms: number;
}

export interface SandboxResult {
  /** What ran the sandbox: "bubblewrap 0.8.0 at /usr/bin/bwrap". */
  sandbox: string;
  /** Calls per variant, over all rounds. */
  calls: number;
  /** Directories of the large tree. */
  directories: number;
  /** `shell` calls of `true`: off, read-only, workspace-write; read-only and workspace-write in the large tree. */
  shell: Timing[];
  /**
   * Troupe's own work, workspace-write: `HostPlanner.plan` and `settle` in the small project and in
   * the large tree (cache warm), the large tree's plan alone, and its first plan (a planner of its own).
   */
  plan: Timing[];
  /** A hook of `true`: through `CommandHooks.beforeTool`, then bash with its payload, hermetic and plain. */
  hooks: Timing[];
}

/** The variants take turns over this many rounds (as in the overhead part). */
const ROUNDS = 5;

interface Variant {
  name: string;
  once: () => Promise<void> | void;
}

/** Each variant's `perRound` calls in each of `ROUNDS` rounds, taking turns, after `warmUp` calls each. */
async function interleave(variants: Variant[], perRound: number, warmUp: number): Promise<Timing[]> {
  for (const variant of variants) for (let i = 0; i < warmUp; i++) await variant.once();
  const samples = variants.map(() => [] as number[]);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [v, variant] of variants.entries()) {
      for (let i = 0; i < perRound; i++) {
        const started = performance.now();
        await variant.once();
        samples[v]?.push(performance.now() - started);
      }
    }
  }
  return variants.map(({ name }, v) => {
    const sorted = (samples[v] ?? []).sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
    return { name, medianMs: at(0.5) ?? Number.NaN, p90Ms: at(0.9) ?? Number.NaN };
  });
}

/** A project of 20 files in 5 directories, with a `.git`. */
function smallProject(root: string): void {
  makeGit(root);
  for (let d = 0; d < 5; d++) {
    const dir = join(root, d === 0 ? "" : `src/part${d}`);
    mkdirSync(dir, { recursive: true });
    for (let f = 0; f < 4; f++) writeFileSync(join(dir, `file${f}.ts`), `export const x${f} = ${f};\n`);
  }
}

/** The directories of each package of the large tree. */
const PACKAGE_DIRS = ["", "lib", "lib/a", "lib/b", "lib/c", "dist", "dist/esm", "dist/cjs", "test", "docs"];

/**
 * A tree of `packages` × 10 directories with a file each, shaped like node_modules, and one `.git`
 * at the top: it differs from the small project by its directories, not by its mounts.
 */
function largeTree(root: string, packages: number): number {
  makeGit(root);
  for (let p = 0; p < packages; p++) {
    for (const sub of PACKAGE_DIRS) {
      const dir = join(root, "node_modules", `pkg${p}`, sub);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "index.js"), "module.exports = 1;\n");
    }
  }
  return packages * PACKAGE_DIRS.length;
}

function makeGit(root: string): void {
  mkdirSync(join(root, ".git/objects"), { recursive: true });
  mkdirSync(join(root, ".git/refs/heads"), { recursive: true });
  writeFileSync(join(root, ".git/HEAD"), "ref: refs/heads/main\n");
}

/** `calls` per variant over all rounds (a multiple of 5 rounds); `warmUp` calls each before. */
export async function measureSandbox(calls: number, warmUp: number): Promise<SandboxResult> {
  const sandbox = detectSandbox();
  if (sandbox.unavailable) throw new Error(`the sandbox bench needs the sandbox: ${sandbox.unavailable}`);
  const base = mkdtempSync(join(tmpdir(), "troupe-bench-sandbox-"));
  const small = join(base, "small");
  const large = join(base, "large");
  const emptyHome = join(base, "home");
  mkdirSync(emptyHome);
  smallProject(small);
  const directories = largeTree(large, 100);
  const perRound = Math.ceil(calls / ROUNDS);
  try {
    const shell = shellTool({ sandbox });
    const controller = new AbortController();
    const call = (workspace: string, confinement: Confinement) => async () => {
      const result = await shell.execute(
        { command: "true", timeout_ms: 120_000 },
        {
          signal: controller.signal,
          callId: "c",
          runId: "r",
          agentId: "a",
          workspace,
          sandbox: confinement,
        },
      );
      if (!result.ok) throw new Error(`shell true failed: ${result.error} ${result.output}`);
    };
    const shellTimings = await interleave(
      [
        { name: "off", once: call(small, { mode: "off", network: false }) },
        { name: "read-only", once: call(small, { mode: "read-only", network: false }) },
        { name: "workspace-write", once: call(small, { mode: "workspace-write", network: false }) },
        { name: "read-only, large tree", once: call(large, { mode: "read-only", network: false }) },
        {
          name: "workspace-write, large tree",
          once: call(large, { mode: "workspace-write", network: false }),
        },
      ],
      perRound,
      warmUp,
    );

    // Troupe's own work around bubblewrap: the plan before a command, the settle after it.
    const request = (workspace: string): HostPlanRequest => ({
      mode: "workspace-write",
      network: false,
      workspace,
    });
    const planner = new HostPlanner();
    const planAndSettle = (workspace: string) => () =>
      void planner.settle(workspace, planner.plan(request(workspace)));
    const planTimings = await interleave(
      [
        { name: "small project, plan and settle", once: planAndSettle(small) },
        { name: "large tree, plan", once: () => void planner.plan(request(large)) },
        { name: "large tree, plan and settle", once: planAndSettle(large) },
        // A planner of its own each time: every directory read, as for an agent's first command.
        { name: "large tree, first plan", once: () => void new HostPlanner().plan(request(large)) },
      ],
      perRound,
      warmUp,
    );

    const hooks = new CommandHooks(
      {
        beforeTool: [
          { match: "*", command: "true", timeoutMs: 10_000, failClosed: false, sandbox: "none" as const },
        ],
        afterTool: [],
        subagentStart: [],
        subagentStop: [],
        agentStop: [],
      },
      small,
      new Redactor(),
      silentLogger,
    );
    const planned: PlannedCall = {
      id: "call_1",
      name: "shell",
      arguments: '{"command":"true"}',
      effect: "execute",
      decision: "allow",
    };
    const context = { runId: "r", agentId: "a" };
    // The payload a hook reads on stdin. Given a socket there (what Node's pipes are), a plain
    // `bash -c` takes itself for a command run by sshd and reads ~/.bashrc: both variants run with
    // an empty HOME, so they differ by the flags alone (a plain one still reads /etc/bash.bashrc).
    const stdin = JSON.stringify({
      event: "beforeTool",
      ...context,
      tool: "shell",
      arguments: planned.arguments,
    });
    const bash = (flags: string[]) => async () => {
      const outcome = await runCommand({
        file: "bash",
        args: [...flags, "-c", "true"],
        cwd: small,
        env: { ...commandEnv(process.env), HOME: emptyHome },
        timeoutMs: 10_000,
        stdin,
      });
      if (outcome.code !== 0) throw new Error(`bash -c true failed: ${outcome.code} ${outcome.stderr}`);
    };
    const hookTimings = await interleave(
      [
        {
          name: "CommandHooks.beforeTool",
          once: async () => {
            if (await hooks.beforeTool(planned, context)) throw new Error("the hook blocked the call");
          },
        },
        { name: "bash --noprofile --norc -c", once: bash(["--noprofile", "--norc"]) },
        { name: "bash -c", once: bash([]) },
      ],
      perRound,
      warmUp,
    );
    return {
      sandbox: sandbox.description,
      calls: perRound * ROUNDS,
      directories,
      shell: shellTimings,
      plan: planTimings,
      hooks: hookTimings,
    };
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

/** A row of bench/results.json and docs/bench.md. */
export interface SandboxRow {
  name: string;
  value: number;
  unit: string;
  target?: string;
}

const PER_COMMAND_TARGET = "≤ 15 ms";

/** The table's rows: medians, the shell calls' p90, and what the sandbox and the hermetic start add. */
export function sandboxRows(result: SandboxResult): SandboxRow[] {
  const pick = (timings: Timing[], name: string) => {
    const timing = timings.find((t) => t.name === name);
    if (!timing) throw new Error(`the sandbox bench measured no "${name}"`);
    return timing;
  };
  const dirs = result.directories.toLocaleString("en-US");
  const labels: Array<[name: string, label: string]> = [
    ["off", "off (a 20-file project)"],
    ["read-only", "read-only"],
    ["workspace-write", "workspace-write"],
    ["read-only, large tree", `read-only in ${dirs} directories`],
    ["workspace-write, large tree", `workspace-write in ${dirs} directories`],
  ];
  const shell = labels.map(([name, label]) => ({ ...pick(result.shell, name), label }));
  const off = shell[0] as Timing;
  const plan = (name: string) => pick(result.plan, name).medianMs;
  const hermetic = pick(result.hooks, "bash --noprofile --norc -c").medianMs;
  const plain = pick(result.hooks, "bash -c").medianMs;
  return [
    ...shell.map((t) => ({
      name: `sandbox: \`shell\` call of \`true\`, ${t.label}`,
      value: t.medianMs,
      unit: "ms",
    })),
    ...shell.map((t) => ({
      name: `sandbox: \`shell\` call of \`true\`, ${t.label}, p90`,
      value: t.p90Ms,
      unit: "ms",
    })),
    ...shell.slice(1).map((t) => ({
      name: `sandbox: added per command, ${t.label} (− off)`,
      value: t.medianMs - off.medianMs,
      unit: "ms",
      target: PER_COMMAND_TARGET,
    })),
    {
      name: "sandbox: plan and settle of a workspace-write command, 20-file project",
      value: plan("small project, plan and settle"),
      unit: "ms",
    },
    {
      name: `sandbox: plan and settle, ${dirs} directories, cache warm (two walks)`,
      value: plan("large tree, plan and settle"),
      unit: "ms",
    },
    {
      name: `sandbox: the plan alone, ${dirs} directories, cache warm`,
      value: plan("large tree, plan"),
      unit: "ms",
    },
    {
      name: `sandbox: the first plan in ${dirs} directories (every directory read)`,
      value: plan("large tree, first plan"),
      unit: "ms",
    },
    {
      name: "hook: a `beforeTool` hook `true` through `CommandHooks`",
      value: pick(result.hooks, "CommandHooks.beforeTool").medianMs,
      unit: "ms",
    },
    { name: "hook: `bash --noprofile --norc -c true`, its payload on stdin", value: hermetic, unit: "ms" },
    { name: "hook: plain `bash -c true`, the same", value: plain, unit: "ms" },
    { name: "hook: what the hermetic start adds (hermetic − plain)", value: hermetic - plain, unit: "ms" },
  ];
}

/** `measureSandbox` in a fresh process (see `measureApart`). */
export const measureSandboxApart = (calls: number, warmUp: number) =>
  measureApart<SandboxResult>(import.meta.url, [String(calls), String(warmUp)]);

await whenRunAsScript(import.meta.url, async ([calls = "200", warmUp = "10"]) =>
  measureSandbox(Number(calls), Number(warmUp)),
);
