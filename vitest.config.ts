import { availableParallelism } from "node:os";
import { configDefaults, defineConfig } from "vitest/config";

/**
 * The multi-host tests put their hosts on 10.88.0.0/24, the subnet deploy/nats/cluster.conf routes
 * over: two of them at once would make two bridges with one address. Their files run one at a time,
 * beside the other tests.
 */
const ON_HOSTS = ["test/fault/hosts-cluster.test.ts", "test/fault/hosts-deploy.test.ts"];

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/hermetic.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Most tests wait on processes, servers and timers rather than the CPU: vitest's default of one
    // worker fewer than the cores left a two-core machine one worker; two there take the suite
    // from about 25 minutes to 14.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        extends: true,
        test: {
          name: "tests",
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...ON_HOSTS],
        },
      },
      { extends: true, test: { name: "on hosts", include: ON_HOSTS, fileParallelism: false } },
    ],
  },
});
