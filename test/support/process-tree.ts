import { readdirSync, readFileSync } from "node:fs";

/** The processes under `root` (its children, theirs, …), read from /proc. */
export function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ")".
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      parent.set(Number(name), ppid);
    } catch {
      // Gone meanwhile.
    }
  }
  const under = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === root) return true;
    return false;
  };
  return [...parent.keys()].filter(under);
}

/** SIGKILL to `root` and every process under it; one that has already gone (ESRCH) is no error. */
export function killTree(root: number): void {
  for (const pid of [...descendants(root), root]) {
    try {
      process.kill(pid, "SIGKILL");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
    }
  }
}
