#!/usr/bin/env node
/*
 * What the tests need from the system, installed when it can be: `npm test` and `.ci/run` both run
 * this first, so there is one list. A missing command is installed without asking when this process
 * may (root, or `sudo -n`, with apt-get or dnf), one line per package; otherwise it stops with one line
 * naming what is missing and the command that installs it.
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Each command the tests run, the package that brings it (Debian's name, then Fedora's), and why. */
export const NEEDS = [
  {
    command: "nats-server",
    apt: "nats-server",
    dnf: "nats-server",
    why: "the fault tests start and kill their own broker",
  },
  { command: "bwrap", apt: "bubblewrap", dnf: "bubblewrap", why: "the command sandbox" },
  { command: "rg", apt: "ripgrep", dnf: "ripgrep", why: "grep and the sandbox's --pre attack" },
  { command: "git", apt: "git", dnf: "git", why: "the sandbox tests attack a real repository" },
  { command: "openssl", apt: "openssl", dnf: "openssl", why: "the TLS tests make certificates" },
  { command: "tmux", apt: "tmux", dnf: "tmux", why: "the observer on a terminal of a given size" },
  { command: "script", apt: "util-linux", dnf: "util-linux", why: "prompts on a pty" },
  { command: "ip", apt: "iproute2", dnf: "iproute", why: "the multi-host tests' network namespaces" },
  { command: "chromium", apt: "chromium", dnf: "chromium", why: "the web console in a real browser" },
];

/** Where else a system command may be: nats-server and ip live in sbin, often off a user's PATH. */
const SBIN = ["/usr/local/sbin", "/usr/sbin", "/sbin"];

/** The directories searched for commands: PATH, then sbin (TROUPE_SETUP_SBIN replaces those, for the setup's own test). */
export function searchDirs(env) {
  const sbin = env.TROUPE_SETUP_SBIN !== undefined ? env.TROUPE_SETUP_SBIN.split(delimiter) : SBIN;
  return [...(env.PATH ?? "").split(delimiter), ...sbin].filter(Boolean);
}

export function onPath(command, dirs) {
  return dirs.some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * What to do about the missing needs: nothing, install them (how), or stop with one line. `manager`
 * is "apt-get", "dnf" or undefined; `root` whether this process is root; `sudo` whether `sudo -n` works.
 */
export function decide({ missing, manager, root, sudo }) {
  if (missing.length === 0) return { action: "none" };
  const names = missing.map((need) => need.command).join(", ");
  if (!manager) {
    const packages = missing.map((need) => need.apt).join(" ");
    return {
      action: "stop",
      line: `test setup: missing ${names}; no apt-get or dnf here: install the packages ${packages} with this system's package manager`,
    };
  }
  const packages = missing.map((need) => (manager === "dnf" ? need.dnf : need.apt));
  const install = [manager, "install", "-y", ...packages];
  if (!root && !sudo) {
    const update = manager === "apt-get" ? "sudo apt-get update && " : "";
    return {
      action: "stop",
      line: `test setup: missing ${names}; install them with: ${update}sudo ${install.join(" ")}`,
    };
  }
  const prefix = root ? [] : ["sudo", "-n"];
  const steps = manager === "apt-get" ? [[...prefix, "apt-get", "update", "-qq"]] : [];
  steps.push([...prefix, ...install, ...(manager === "apt-get" ? ["-qq"] : ["-q"])]);
  return { action: "install", steps, packages };
}

function say(line) {
  process.stderr.write(`${line}\n`);
}

/** Runs a command quietly: what it printed is shown only when it fails (its last lines). */
function run(argv, env) {
  const [command, ...args] = argv;
  const done = spawnSync(command, args, { stdio: ["ignore", "pipe", "pipe"], env, maxBuffer: 64 << 20 });
  if (done.status === 0) return true;
  const printed = `${done.stdout ?? ""}${done.stderr ?? ""}`.trimEnd().split("\n").slice(-20);
  for (const line of printed) if (line) say(`  ${line}`);
  return false;
}

export function main(env = process.env) {
  const dirs = searchDirs(env);
  const missing = NEEDS.filter((need) => !onPath(need.command, dirs));
  const manager = ["apt-get", "dnf"].find((name) => onPath(name, dirs));
  const root = process.getuid?.() === 0;
  const sudo =
    !root && onPath("sudo", dirs) && spawnSync("sudo", ["-n", "true"], { stdio: "ignore", env }).status === 0;
  const decision = decide({ missing, manager, root, sudo });
  if (decision.action === "none") return 0;
  if (decision.action === "stop") {
    say(decision.line);
    return 1;
  }
  for (const [index, need] of missing.entries())
    say(`test setup: installing ${decision.packages[index]} (${need.command}: ${need.why})`);
  const childEnv = { ...env, DEBIAN_FRONTEND: "noninteractive" };
  for (const step of decision.steps)
    if (!run(step, childEnv)) {
      say(`test setup: "${step.join(" ")}" failed; run it yourself, then npm test again`);
      return 1;
    }
  const still = missing.filter((need) => !onPath(need.command, dirs));
  if (still.length > 0) {
    say(
      `test setup: ${still.map((need) => need.command).join(", ")} still missing after installing ${decision.packages.join(" ")}`,
    );
    return 1;
  }
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main();
