import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error: a plain script of the repository, without types
import { decide, NEEDS } from "../../scripts/test-setup.mjs";

/*
 * `npm test`'s set-up: on a machine missing the tests' system tools it installs them when it may,
 * else stops with one line. The script runs for real, with a PATH holding none of the tools and a
 * package manager of the test's own that records what it was asked and puts stand-ins in place.
 */
const SCRIPT = resolve(import.meta.dirname, "../../scripts/test-setup.mjs");

interface Need {
  command: string;
  apt: string;
  dnf: string;
}
const needs = NEEDS as Need[];

let dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs = [];
});

/** A bin dir with a fake apt-get (and sudo), and stand-ins for the commands in `present`. */
function fakeMachine(
  present: string[],
  { sudoWorks, installFails = false }: { sudoWorks: boolean; installFails?: boolean },
) {
  const bin = mkdtempSync(join(tmpdir(), "troupe-setup-bin-"));
  dirs.push(bin);
  chmodSync(bin, 0o777);
  const log = join(bin, "calls.log");
  const stub = (path: string) => {
    writeFileSync(path, "#!/bin/sh\nexit 0\n");
    chmodSync(path, 0o755);
  };
  for (const command of present) stub(join(bin, command));
  const made = needs.map(
    (need) => `${need.apt}) /bin/touch "${bin}/${need.command}"; /bin/chmod 755 "${bin}/${need.command}";;`,
  );
  writeFileSync(
    join(bin, "apt-get"),
    `#!/bin/sh\necho "apt-get $*" >> "${log}"\necho "Reading package lists..."\n[ "$1" = install ] || exit 0\n${installFails ? 'echo "E: Unable to locate package $3" >&2; exit 100\n' : ""}for p in "$@"; do echo "Setting up $p"; case "$p" in\n${made.join("\n")}\nesac; done\n`,
  );
  chmodSync(join(bin, "apt-get"), 0o755);
  writeFileSync(
    join(bin, "sudo"),
    `#!/bin/sh\necho "sudo $*" >> "${log}"\n${sudoWorks ? 'shift; [ "$1" = true ] && exit 0; exec "$@"' : "exit 1"}\n`,
  );
  chmodSync(join(bin, "sudo"), 0o755);
  return { bin, calls: () => (existsSync(log) ? readFileSync(log, "utf8") : "") };
}

function runSetup(bin: string, asNobody = false) {
  const env = { PATH: bin, TROUPE_SETUP_SBIN: "", HOME: bin };
  const argv = asNobody
    ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, SCRIPT]
    : [process.execPath, SCRIPT];
  const [command, ...args] = argv as [string, ...string[]];
  const result = spawnSync(asNobody ? "/usr/bin/setpriv" : command, args, { env, encoding: "utf8" });
  return { code: result.status, stderr: result.stderr, stdout: result.stdout };
}

describe("npm test's set-up", () => {
  it("installs every missing package as root, one line each, and then finds them", () => {
    const machine = fakeMachine([], { sudoWorks: false });
    const result = runSetup(machine.bin);
    expect(result.code).toBe(0);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(needs.length);
    for (const need of needs) expect(result.stderr).toContain(`installing ${need.apt} (${need.command}:`);
    expect(machine.calls()).toBe(
      `apt-get update -qq\napt-get install -y ${needs.map((need) => need.apt).join(" ")} -qq\n`,
    );
    for (const need of needs) expect(existsSync(join(machine.bin, need.command))).toBe(true);
    expect(result.stdout).toBe("");
  });

  it("shows what the package manager printed only when it fails, and stops", () => {
    const machine = fakeMachine(["git"], { sudoWorks: false, installFails: true });
    const result = runSetup(machine.bin);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    const lines = result.stderr.trim().split("\n");
    expect(lines.slice(-3)).toEqual([
      "  Reading package lists...",
      `  E: Unable to locate package ${needs[0]?.apt}`,
      expect.stringMatching(
        /^test setup: "apt-get install -y .* -qq" failed; run it yourself, then npm test again$/,
      ),
    ]);
    expect(result.stderr).not.toContain("Setting up");
  });

  it("installs only what is missing", () => {
    const present = needs.map((need) => need.command).filter((c) => c !== "bwrap" && c !== "chromium");
    const machine = fakeMachine(present, { sudoWorks: false });
    const result = runSetup(machine.bin);
    expect(result.code).toBe(0);
    expect(machine.calls()).toContain("apt-get install -y bubblewrap chromium -qq");
    expect(result.stderr.trim().split("\n")).toHaveLength(2);
  });

  it("does nothing and says nothing when everything is there", () => {
    const machine = fakeMachine(
      needs.map((need) => need.command),
      { sudoWorks: false },
    );
    const result = runSetup(machine.bin);
    expect(result).toMatchObject({ code: 0, stderr: "" });
    expect(machine.calls()).toBe("");
  });

  it("as another user without sudo, stops with one line naming what is missing and the command", () => {
    const machine = fakeMachine(["git", "tmux"], { sudoWorks: false });
    const result = runSetup(machine.bin, true);
    expect(result.code).toBe(1);
    const missing = needs.filter((need) => need.command !== "git" && need.command !== "tmux");
    expect(result.stderr).toBe(
      `test setup: missing ${missing.map((need) => need.command).join(", ")}; install them with: sudo apt-get update && sudo apt-get install -y ${missing.map((need) => need.apt).join(" ")}\n`,
    );
    expect(machine.calls()).toBe("sudo -n true\n");
  });

  it("as another user with sudo -n, installs through sudo", () => {
    const machine = fakeMachine(
      needs.map((need) => need.command).filter((c) => c !== "rg"),
      { sudoWorks: true },
    );
    const result = runSetup(machine.bin, true);
    expect(result.code).toBe(0);
    expect(machine.calls()).toBe(
      "sudo -n true\nsudo -n apt-get update -qq\napt-get update -qq\nsudo -n apt-get install -y ripgrep -qq\napt-get install -y ripgrep -qq\n",
    );
  });

  it("names dnf's packages on a dnf machine, and says what to install where there is no package manager", () => {
    const missing = needs.filter((need) => need.command === "ip");
    expect(decide({ missing, manager: "dnf", root: true, sudo: false })).toEqual({
      action: "install",
      steps: [["dnf", "install", "-y", "iproute", "-q"]],
      packages: ["iproute"],
    });
    expect(decide({ missing, manager: undefined, root: true, sudo: false })).toEqual({
      action: "stop",
      line: "test setup: missing ip; no apt-get or dnf here: install the packages iproute2 with this system's package manager",
    });
  });
});
