import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApproverTrust, createKey, type Identity, identityFromFile } from "../../src/trust/approvers.js";

/** A key made as `troupe keys create NAME` makes it, in a data dir of its own. */
export function newIdentity(name: string): Identity {
  const dir = mkdtempSync(join(tmpdir(), "troupe-key-"));
  return identityFromFile(createKey(dir, name).file);
}

/** Trust in exactly these identities, as troupe.yaml's `approvers:` would list them. */
export function trusting(...identities: Identity[]): ApproverTrust {
  return new ApproverTrust(Object.fromEntries(identities.map((id) => [id.name, id.publicKey])), undefined);
}
