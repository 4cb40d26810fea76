import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { get, takeSession, whenGone } from "./api.js";
import { RunView } from "./run-view.js";
import { RunsList } from "./runs-list.js";

function App() {
  const [hash, setHash] = useState(location.hash);
  const [gone, setGone] = useState(false);
  useEffect(() => whenGone(() => setGone(true)), []);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener("hashchange", changed);
    // The hash may have changed between the first render and this effect (it runs after a paint).
    changed();
    return () => removeEventListener("hashchange", changed);
  }, []);
  if (gone) return <ConsoleGone />;
  const run = /^#\/runs\/([A-Za-z0-9_-]+)$/.exec(hash);
  return run ? <RunView runId={run[1] as string} /> : <RunsList />;
}

/**
 * In place of the console once it has gone: nothing it showed stays, since nothing here can be kept
 * up to date, and nothing more is asked of this address, since another program may answer there now.
 */
function ConsoleGone() {
  return (
    <main class="gone" data-testid="console-gone">
      <h1>The console went away</h1>
      <p>
        Its daemon stopped or restarted. This page shows nothing more and asks nothing more of this address:
        whatever answers here now may be another program, not the console.
      </p>
      <p>
        Run <code>troupe web</code> on the daemon's machine: it prints a login for the console as it is now (a
        daemon started again listens on a new port, unless <code>web.listen</code> fixes one), or says that no
        console runs.
      </p>
    </main>
  );
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
