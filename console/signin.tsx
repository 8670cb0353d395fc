// The sign-in page: an API key typed in, tried against agentd once
// before it is kept, so that a mistyped key is told here rather than as
// the inbox's error; or, where agentd names an OpenID Connect issuer,
// a sign-in there (oidc.ts), whose return lands here too.
import { Code } from "@connectrpc/connect";
import { useEffect, useState } from "preact/hooks";

import { agentClient, failure } from "./api.js";
import { begin, complete, pageConfig, returned, type SignIn as OIDCSignIn } from "./oidc.js";

export function SignIn({ onSignedIn }: { onSignedIn(key: string): void }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const oidc = useOIDC(onSignedIn, setError, setBusy);

  // Only a refused key keeps the page here: a key that may not read the
  // inbox, or an agentd that does not answer, is the inbox's to explain.
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) {
      setError("Type or paste an API key.");
      return;
    }
    setBusy(true);
    setError("");
    try {
      await agentClient(k).listPendingRequests({ pageSize: 1 }, { timeoutMs: 10_000 });
    } catch (err) {
      const f = failure(err);
      if (f.code === Code.Unauthenticated) {
        setError(`agentd refused this key (${f.text}).`);
        setBusy(false);
        return;
      }
    }
    onSignedIn(k);
  };

  return (
    <main id="main">
      <h1>Sign in</h1>
      {oidc && <IssuerSignIn oidc={oidc} busy={busy} onError={setError} />}
      <p>
        Sign in with an API key of your tenant. The console keeps it in this tab only (its session storage) and
        sends it to agentd with each call; Sign out forgets it.
      </p>
      <form class="signin" onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autoComplete="off"
          spellcheck={false}
          autoFocus
          required
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
        <button id="sign-in" type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <p id="error" class="error" role="alert">
        {error}
      </p>
    </main>
  );
}

// useOIDC reads agentd's sign-in settings, and finishes a sign-in the
// issuer sent the user back from; it returns the settings, once read,
// when agentd names an issuer.
function useOIDC(onSignedIn: (token: string) => void, setError: (e: string) => void, setBusy: (b: boolean) => void) {
  const [oidc, setOIDC] = useState<OIDCSignIn>();
  useEffect(() => {
    const back = returned();
    if (back) setBusy(true);
    pageConfig()
      .then(async (cfg) => {
        setOIDC(cfg.oidc);
        if (!back) return;
        if (!cfg.oidc) throw new Error("agentd names no issuer to sign in with");
        onSignedIn(await complete(cfg.oidc));
      })
      .catch((err: unknown) => {
        setError(`Signing in did not succeed: ${err instanceof Error ? err.message : String(err)}.`);
        setBusy(false);
      });
  }, []);
  return oidc;
}

function IssuerSignIn({ oidc, busy, onError }: { oidc: OIDCSignIn; busy: boolean; onError(e: string): void }) {
  const name = issuerName(oidc.issuer);
  if (oidc.error || !oidc.authorization_endpoint) {
    return (
      <p id="oidc-unavailable" class="notice">
        Signing in with {name} is not available now: {oidc.error || "agentd does not know its endpoints"}.
      </p>
    );
  }
  const go = () => begin(oidc).catch((err: unknown) => onError(`Signing in could not start: ${String(err)}.`));
  return (
    <div class="issuer-signin">
      <p>
        Sign in at your organisation's identity provider, which sends you back here. The console keeps the token it
        gives in this tab only, as it keeps an API key.
      </p>
      <button id="oidc-sign-in" type="button" class="primary" disabled={busy} onClick={go}>
        Sign in with {name}
      </button>
    </div>
  );
}

// issuerName is how the button names the issuer: its host (and path,
// when it has one, as a realm of a shared server does).
function issuerName(issuer: string): string {
  try {
    const u = new URL(issuer);
    return u.host + u.pathname.replace(/\/$/, "");
  } catch {
    return issuer;
  }
}
