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

import { adminClient, agentClient, forgetKey, keepKey, storedKey, type Admin, type Agent } from "./api.js";
import { Inbox } from "./inbox.js";
import { MCPServers } from "./mcp.js";
import { SignIn } from "./signin.js";
import { Tenants } from "./tenants.js";

type Route = "signin" | "inbox" | "mcp" | "tenants";

const titles: Record<Route, string> = { signin: "Sign in", inbox: "Inbox", mcp: "MCP servers", tenants: "Tenants" };

// routeOf is the page a fragment names; what follows its "?" is the
// page's own state.
function routeOf(hash: string): Route | undefined {
  const name = hash.replace(/^#\//, "").split("?")[0];
  return Object.hasOwn(titles, name) ? (name as Route) : undefined;
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
  const admin = useMemo(() => (key ? adminClient(key) : undefined), [key]);
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
                {(["inbox", "mcp", "tenants"] as const).map((r) => (
                  <li key={r}>
                    <a href={`#/${r}`} aria-current={route === r ? "page" : undefined}>
                      {titles[r]}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
            <button id="sign-out" type="button" onClick={signOut}>
              Sign out
            </button>
          </>
        )}
      </header>
      {agent && admin ? <Page route={shown} agent={agent} admin={admin} /> : <SignIn onSignedIn={signIn} />}
    </>
  );
}

function Page({ route, agent, admin }: { route: Route; agent: Agent; admin: Admin }) {
  if (route === "mcp") return <MCPServers agent={agent} admin={admin} />;
  if (route === "tenants") return <Tenants admin={admin} />;
  return <Inbox agent={agent} />;
}

render(<App />, document.getElementById("app")!);
