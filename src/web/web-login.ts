import { join } from "node:path";

/** Where a daemon serving the web console keeps a login URL for `troupe web` (0600, remade after each use). */
export function webLoginFile(dataDir: string): string {
  return join(dataDir, "web-login");
}
