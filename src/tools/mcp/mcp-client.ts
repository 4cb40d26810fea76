import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Client, ClientOptions } from "@modelcontextprotocol/sdk/client/index.js";
import type {
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult,
} from "@modelcontextprotocol/sdk/types.js";
import { realPathOrUndefined } from "../../util/paths.js";
import { loadSdk } from "./mcp-transport.js";

/**
 * Makes Troupe's clients of MCP servers. Each declares the `roots` capability and answers
 * `roots/list` with the workspace, by its real path, as the one root: a server that honours roots
 * (server-filesystem does) holds itself to it whatever its arguments allow. The workspace of a
 * runtime (and of its servers) never changes, so roots/list_changed is never sent. Given `sample`,
 * it declares `sampling` too, and hands each `sampling/createMessage` to it; given `elicit`,
 * `elicitation` (form mode), and each `elicitation/create`.
 */
export async function clientFactory(
  workspace: string,
  options: {
    listChanged?: ClientOptions["listChanged"];
    sample?: (params: CreateMessageRequest["params"], signal: AbortSignal) => Promise<CreateMessageResult>;
    elicit?: (params: ElicitRequest["params"], signal: AbortSignal) => Promise<ElicitResult>;
  } = {},
): Promise<() => Client> {
  const [{ Client }, , , , { ListRootsRequestSchema, CreateMessageRequestSchema, ElicitRequestSchema }] =
    await loadSdk();
  const root = realPathOrUndefined(workspace) ?? resolve(workspace);
  const roots = [{ uri: pathToFileURL(root).href, name: "workspace" }];
  const { listChanged, sample, elicit } = options;
  return () => {
    const client = new Client(
      { name: "troupe", version: "0.1.0" },
      {
        capabilities: {
          roots: {},
          ...(sample ? { sampling: {} } : {}),
          // Form mode only: a URL to open is not something every terminal of a daemon can do.
          ...(elicit ? { elicitation: { form: {} } } : {}),
        },
        ...(listChanged ? { listChanged } : {}),
      },
    );
    client.setRequestHandler(ListRootsRequestSchema, () => ({ roots }));
    if (sample)
      client.setRequestHandler(CreateMessageRequestSchema, (request, extra) =>
        sample(request.params, extra.signal),
      );
    if (elicit)
      client.setRequestHandler(ElicitRequestSchema, (request, extra) => elicit(request.params, extra.signal));
    return client;
  };
}
