// The console: agentd's web page for the people around a generation,
// served by agentd at /console/ on the API's origin. Its pages are named
// in the URL's fragment (#/signin, #/inbox), so a link to one can be
// shared; every page but the sign-in needs an API key, and sends a
// visitor without one to #/signin.
//
// Why Preact: it is small (a small part of the bundle), maintained, has
// React's API (components, hooks, JSX) that most web developers read at
// sight, and it escapes text by default: what models, tools and MCP
// servers say is always rendered as text, never as markup. The console
// never sets HTML from a string.
import { render } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";

import { agentClient, forgetKey, keepKey, storedKey } from "./api.js";
import { Inbox } from "./inbox.js";
import { SignIn } from "./signin.js";

type Route = "signin" | "inbox";

const titles: Record<Route, string> = { signin: "Sign in", inbox: "Inbox" };

function routeOf(hash: string): Route | undefined {
  const name = hash.replace(/^#\//, "");
  return name === "signin" || name === "inbox" ? name : undefined;
}

function useRoute(): Route | undefined {
  const [route, setRoute] = useState(() => routeOf(location.hash));
  useEffect(() => {
    const onHash = () => setRoute(routeOf(location.hash));
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);
  return route;
}

// want is the route to show: the sign-in page without a key, the inbox
// for a signed-in visitor who asked for the sign-in page or for none.
function want(route: Route | undefined, signedIn: boolean): Route {
  if (!signedIn) return "signin";
  return route === undefined || route === "signin" ? "inbox" : route;
}

function App() {
  const [key, setKey] = useState(storedKey);
  const route = useRoute();
  const agent = useMemo(() => (key ? agentClient(key) : undefined), [key]);
  const shown = want(route, key !== "");

  useEffect(() => {
    if (shown !== route) location.replace(`#/${shown}`);
    document.title = `${titles[shown]} · agentd console`;
  }, [shown, route]);

  const signIn = (k: string) => {
    keepKey(k);
    setKey(k);
  };
  const signOut = () => {
    forgetKey();
    setKey("");
  };

  if (shown !== route) return null;
  return (
    <>
      <header class="top">
        <p class="brand">agentd console</p>
        {agent && (
          <>
            <nav aria-label="Pages">
              <ul>
                <li>
                  <a href="#/inbox" aria-current={route === "inbox" ? "page" : undefined}>
                    Inbox
                  </a>
                </li>
              </ul>
            </nav>
            <button id="sign-out" type="button" onClick={signOut}>
              Sign out
            </button>
          </>
        )}
      </header>
      {agent ? <Inbox agent={agent} /> : <SignIn onSignedIn={signIn} />}
    </>
  );
}

render(<App />, document.getElementById("app")!);
