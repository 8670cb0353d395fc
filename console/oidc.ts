// Signing in with an OpenID Connect issuer: the authorization code flow
// with PKCE (S256), as a public client, the page being its own redirect
// URL. agentd names the issuer, its endpoints and which token it accepts
// in config.json; the page sends its user to the authorization endpoint,
// and, back with a code, exchanges it at the token endpoint itself (no
// secret: the code verifier, kept in this tab only, proves the page
// asked). The token is then kept and sent as an API key is.

// SignIn is config.json's oidc, as internal/console's SignIn writes it.
export interface SignIn {
  issuer: string;
  client_id: string;
  scopes: string[];
  token: "id_token" | "access_token";
  authorization_endpoint: string;
  token_endpoint: string;
  error?: string;
}

export interface PageConfig {
  oidc?: SignIn;
}

export async function pageConfig(): Promise<PageConfig> {
  const res = await fetch("config.json", { cache: "no-store" });
  if (!res.ok) throw new Error(`config.json: HTTP ${res.status}`);
  return (await res.json()) as PageConfig;
}

// The sign-in under way, kept in the tab's session storage between the
// redirect to the issuer and the return: what proves the return is the
// answer to this tab's request (state), that the ID token was made for it
// (nonce), and that the page asked for the code (the verifier).
const pendingItem = "agentd.console.oidc";

interface Pending {
  state: string;
  nonce: string;
  verifier: string;
}

// redirectURL is where the issuer sends the user back: the console's
// address, as its client is registered with.
export function redirectURL(): string {
  return new URL("/console/", location.origin).href;
}

// begin sends the user to the issuer's authorization endpoint.
export async function begin(s: SignIn): Promise<void> {
  const pending: Pending = { state: random(), nonce: random(), verifier: random() };
  sessionStorage.setItem(pendingItem, JSON.stringify(pending));
  const u = new URL(s.authorization_endpoint);
  const q = u.searchParams;
  q.set("response_type", "code");
  q.set("client_id", s.client_id);
  q.set("redirect_uri", redirectURL());
  q.set("scope", s.scopes.join(" "));
  q.set("state", pending.state);
  q.set("nonce", pending.nonce);
  q.set("code_challenge", await challenge(pending.verifier));
  q.set("code_challenge_method", "S256");
  location.assign(u.href);
}

// returned reports whether the page was loaded as the issuer's answer.
export function returned(): boolean {
  const q = new URLSearchParams(location.search);
  return q.has("state") && (q.has("code") || q.has("error"));
}

// complete finishes a sign-in the issuer answered: it checks the answer
// is to this tab's request, exchanges the code, checks the ID token's
// nonce, issuer and audience, and returns the token agentd accepts. The
// answer leaves the address bar either way, so that a reload does not
// try a spent code again.
export async function complete(s: SignIn): Promise<string> {
  const q = new URLSearchParams(location.search);
  history.replaceState(null, "", location.pathname + location.hash);
  const pending = takePending();
  if (!pending || q.get("state") !== pending.state) {
    throw new Error("the answer is not to a sign-in this tab started; sign in again");
  }
  const error = q.get("error");
  if (error) throw new Error(`${s.issuer} refused: ${q.get("error_description") || error}`);
  const tokens = await exchange(s, q.get("code") ?? "", pending.verifier);
  checkIDToken(s, tokens.id_token, pending.nonce);
  const token = tokens[s.token];
  if (typeof token !== "string" || !token) throw new Error(`the token endpoint gave no ${s.token}`);
  return token;
}

function takePending(): Pending | undefined {
  const raw = sessionStorage.getItem(pendingItem);
  sessionStorage.removeItem(pendingItem);
  try {
    return raw ? (JSON.parse(raw) as Pending) : undefined;
  } catch {
    return undefined;
  }
}

interface Tokens {
  id_token?: unknown;
  access_token?: unknown;
  error?: unknown;
  error_description?: unknown;
}

async function exchange(s: SignIn, code: string, verifier: string): Promise<Tokens> {
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code,
    redirect_uri: redirectURL(),
    client_id: s.client_id,
    code_verifier: verifier,
  });
  const res = await fetch(s.token_endpoint, { method: "POST", body, headers: { Accept: "application/json" } });
  const tokens = (await res.json().catch(() => ({}))) as Tokens;
  if (!res.ok) {
    const why = typeof tokens.error_description === "string" ? tokens.error_description : String(tokens.error ?? "");
    throw new Error(`the token endpoint answered HTTP ${res.status}${why ? `: ${why}` : ""}`);
  }
  return tokens;
}

// checkIDToken checks what the page can of the ID token: that it answers
// this sign-in (nonce), from this issuer, for this client. Its signature
// is agentd's to check, on every call.
function checkIDToken(s: SignIn, token: unknown, nonce: string) {
  if (typeof token !== "string") throw new Error("the token endpoint gave no ID token (is openid among the scopes?)");
  let claims: { nonce?: unknown; iss?: unknown; aud?: unknown };
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(payload), (c) => c.charCodeAt(0))));
  } catch {
    throw new Error("the ID token is not a JWT");
  }
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (claims.nonce !== nonce) throw new Error("the ID token answers another sign-in (its nonce differs)");
  if (claims.iss !== s.issuer || !aud.includes(s.client_id)) {
    throw new Error("the ID token is from another issuer, or for another client");
  }
}

// random is 32 random bytes, base64url: a state, nonce or code verifier
// (43 characters, as PKCE asks).
function random(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function challenge(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}
