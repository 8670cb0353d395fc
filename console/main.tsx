// The console: agentd's web page for the people around a generation,
// served by agentd at /console/ on the API's origin. Its pages are named
// in the URL's fragment, with their state (#/generations?state=running,
// #/generations/ID), so a link to one can be shared; every page but the
// sign-in needs an API key, and sends a visitor without one to #/signin.
//
// Why Preact: it is small (a small part of the bundle), maintained, has
// React's API (components, hooks, JSX) that most web developers read at
// sight, and it escapes text by default: what models, tools and MCP
// servers say is always rendered as text, never as markup. The console
// never sets HTML from a string.
import { Fragment, render, type ComponentChildren } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";

import { adminClient, agentClient, forgetKey, keepKey, storedKey, type Admin, type Agent } from "./api.js";
import { GenerationPage } from "./generation.js";
import { Generations } from "./generations.js";
import { Inbox } from "./inbox.js";
import { MCPServers } from "./mcp.js";
import { match, useLocation } from "./route.js";
import { mayDecide, useCaller, useConfig, type Caller, type Config } from "./session.js";
import { SignIn } from "./signin.js";
import { Tenants } from "./tenants.js";
import { ThreadPage, Threads } from "./threads.js";

// What a page is given: the client, who is signed in, agentd's console
// settings, the parameters of its path and the query of its fragment.
export interface PageProps {
  agent: Agent;
  admin: Admin;
  caller: Caller;
  config: Config;
  params: Record<string, string>;
  query: URLSearchParams;
}

interface Route {
  // The path after "#/", a ":name" segment taking any one.
  pattern: string;
  title: string;
  // Listed in the navigation.
  nav?: boolean;
  page(p: PageProps): ComponentChildren;
}

// The console's pages, one line each; the first is where a signed-in
// visitor lands.
const routes: Route[] = [
  { pattern: "inbox", title: "Inbox", nav: true, page: (p) => <Inbox agent={p.agent} mayDecide={mayDecide(p.caller)} /> },
  { pattern: "generations", title: "Generations", nav: true, page: (p) => <Generations {...p} /> },
  { pattern: "generations/:id", title: "Generation", page: (p) => <GenerationPage {...p} /> },
  { pattern: "threads", title: "Threads", nav: true, page: (p) => <Threads {...p} /> },
  { pattern: "threads/:id", title: "Thread", page: (p) => <ThreadPage {...p} /> },
  { pattern: "mcp", title: "MCP servers", nav: true, page: (p) => <MCPServers {...p} /> },
  { pattern: "tenants", title: "Tenants", nav: true, page: (p) => <Tenants {...p} /> },
];

function routeOf(path: string): { route: Route; params: Record<string, string> } | undefined {
  for (const route of routes) {
    const params = match(route.pattern, path);
    if (params) return { route, params };
  }
  return undefined;
}

// Until agentd says who the caller is, the page offers no button.
const asking: Caller = { known: true, name: "", tenant: "", roles: [] };

function App() {
  const [key, setKey] = useState(storedKey);
  const loc = useLocation();
  const agent = useMemo(() => (key ? agentClient(key) : undefined), [key]);
  const admin = useMemo(() => adminClient(key), [key]);
  const caller = useCaller(agent);
  const config = useConfig();
  const found = routeOf(loc.path);
  // Where the visitor belongs: the sign-in page without a key, the first
  // page for a signed-in visitor who asked for the sign-in page or one
  // there is not.
  const belongs = !agent ? "signin" : found ? loc.path : routes[0].pattern;
  const here = belongs === loc.path;

  useEffect(() => {
    if (!here) location.replace(`#/${belongs}`);
    document.title = `${found && agent ? found.route.title : "Sign in"} · agentd console`;
  }, [here, belongs, found, agent]);

  const signIn = (k: string) => {
    keepKey(k);
    setKey(k);
  };
  const signOut = () => {
    forgetKey();
    setKey("");
  };

  if (!here) return null;
  return (
    <>
      <header class="top">
        <p class="brand">agentd console</p>
        {agent && (
          <>
            <Nav path={loc.path} />
            <Who caller={caller} />
            <button id="sign-out" type="button" onClick={signOut}>
              Sign out
            </button>
          </>
        )}
      </header>
      {agent && found ? (
        // Keyed by path: another generation or thread is a page of its own.
        <Fragment key={loc.path}>
          {found.route.page({ agent, admin, caller: caller ?? asking, config, params: found.params, query: loc.query })}
        </Fragment>
      ) : (
        <SignIn onSignedIn={signIn} />
      )}
    </>
  );
}

function Nav({ path }: { path: string }) {
  const section = path.split("/")[0];
  return (
    <nav aria-label="Pages">
      <ul>
        {routes
          .filter((r) => r.nav)
          .map((r) => (
            <li key={r.pattern}>
              <a href={`#/${r.pattern}`} aria-current={section === r.pattern ? "page" : undefined}>
                {r.title}
              </a>
            </li>
          ))}
      </ul>
    </nav>
  );
}

function Who({ caller }: { caller: Caller | undefined }) {
  if (!caller?.known) return null;
  return (
    <p class="who" data-testid="caller">
      {caller.name}
      {caller.tenant && ` of ${caller.tenant}`}
      {caller.roles.length > 0 && <span class="roles"> ({caller.roles.join(", ")})</span>}
    </p>
  );
}

render(<App />, document.getElementById("app")!);
