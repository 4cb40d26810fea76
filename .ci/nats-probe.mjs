// Exit 0 when a NATS server with JetStream answers at the URL given (default nats://127.0.0.1:4222).
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

const url = process.argv[2] ?? "nats://127.0.0.1:4222";
try {
  const nc = await connect({ servers: url, timeout: 1000, maxReconnectAttempts: 0 });
  try {
    await (await jetstreamManager(nc)).getAccountInfo();
  } finally {
    await nc.close();
  }
  process.exit(0);
} catch {
  process.exit(1);
}
