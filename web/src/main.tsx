import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { takeSession } from "./api.js";
import { RunView } from "./run-view.js";
import { RunsList } from "./runs-list.js";

function App() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  const run = /^#\/runs\/([A-Za-z0-9_-]+)$/.exec(hash);
  return run ? <RunView runId={run[1] as string} /> : <RunsList />;
}

const app = document.getElementById("app") as HTMLElement;
if (takeSession()) render(<App />, app);
else render(<p data-testid="logged-out">Log in with the URL troupe web prints.</p>, app);
