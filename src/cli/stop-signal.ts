/**
 * Resolves on the first SIGINT or SIGTERM. Taken as a long-running command starts, not when it is
 * ready: a signal that comes while it connects (or in the moment after it says it is ready) then
 * stops it in order, instead of killing it with its children (an embedded nats-server) left behind.
 */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve(signal);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}
