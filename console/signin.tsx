// The sign-in page: an API key typed in, tried against agentd once
// before it is kept, so that a mistyped key is told here rather than as
// the inbox's error.
import { Code } from "@connectrpc/connect";
import { useState } from "preact/hooks";

import { agentClient, failure } from "./api.js";

export function SignIn({ onSignedIn }: { onSignedIn(key: string): void }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

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
