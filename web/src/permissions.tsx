import { useEffect, useState } from "preact/hooks";
import type { ListedRule } from "../../src/config/permissions-listed.js";
import { get } from "./api.js";

/** The daemon's allow and deny rules (troupe.yaml's `permissions`), as `troupe permissions` lists them. */
export function Permissions() {
  const [rules, setRules] = useState<ListedRule[] | undefined>(undefined);
  useEffect(() => {
    get<ListedRule[]>("/api/permissions").then(setRules, () => setRules([]));
  }, []);
  if (rules === undefined) return null;
  return (
    <section class="permissions" data-testid="permissions">
      <h2>Permissions</h2>
      {rules.length === 0 ? (
        <p class="quiet">No allow or deny rules: the approval policy decides every call.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Rule</th>
              <th>Pattern</th>
              <th>Where</th>
            </tr>
          </thead>
          <tbody>
            {rules.map((rule) => (
              <tr data-testid="permission-rule" data-kind={rule.kind}>
                <td>
                  <span class={`status ${rule.kind === "deny" ? "failed" : "done"}`}>{rule.kind}</span>
                </td>
                <td>
                  <code>{rule.pattern}</code>
                </td>
                <td class="quiet">{rule.where}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
