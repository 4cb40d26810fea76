import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { get, takeSession } from "./api.js";
import { RunView } from "./run-view.js";
import { RunsList } from "./runs-list.js";

function App() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener("hashchange", changed);
    // The hash may have changed between the first render and this effect (it runs after a paint).
    changed();
    return () => removeEventListener("hashchange", changed);
  }, []);
  const run = /^#\/runs\/([A-Za-z0-9_-]+)$/.exec(hash);
  return run ? <RunView runId={run[1] as string} /> : <RunsList />;
}

/** The console, once the session the page holds is one the daemon knows (it forgets them when it restarts). */
async function start(app: HTMLElement): Promise<void> {
  const known =
    takeSession() &&
    (await get("/api/whoami").then(
      () => true,
      () => false,
    ));
  if (known) render(<App />, app);
  else render(<p data-testid="logged-out">Log in with the URL troupe web prints.</p>, app);
}

void start(document.getElementById("app") as HTMLElement);
