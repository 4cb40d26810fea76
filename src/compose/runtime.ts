import { Runtime } from "../actors/runtime.js";
import type { RuntimeOptions } from "../actors/runtime-options.js";

/**
 * Makes and opens a runtime: the one way a process assembles one (every command of the CLI and the
 * library's `createRuntime`). `check` runs on the runtime before it opens anything (no MCP server
 * started, no tool module loaded), to refuse what cannot run; a runtime that fails its check or its
 * opening is closed again, so nothing it started is left running.
 */
export async function openRuntime(
  options: RuntimeOptions,
  check?: (runtime: Runtime) => void,
): Promise<Runtime> {
  const runtime = new Runtime(options);
  try {
    check?.(runtime);
    return await runtime.open();
  } catch (error) {
    await runtime.close().catch(() => {});
    throw error;
  }
}
