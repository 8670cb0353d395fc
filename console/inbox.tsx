// The inbox page: the tenant's pending requests, newest first, asked of
// agentd every half second while the page is visible, so that a new one
// shows within a second; approvals and input requests answered from here.
import { Code } from "@connectrpc/connect";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

import { failure, type Agent, type Failure } from "./api.js";
import { answered, decision, merge, refused, type Answer, type Entry } from "./pending.js";
import { useNow, usePolling } from "./poll.js";
import { RequestItem } from "./request.js";

const pollEvery = 500;
const pageSize = 100;
const callTimeoutMs = 10_000;
// What ListPendingRequests and DecideRequests need, as a refusal is
// explained.
const decidingRoles = 'the role "generate" or "approve"';

// mayDecide: the caller's roles allow deciding (GetCaller); when they do
// not, the page shows no decision buttons.
export function Inbox({ agent, mayDecide = true }: { agent: Agent; mayDecide?: boolean }) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [loaded, setLoaded] = useState(false);
  const [more, setMore] = useState(false);
  const [error, setError] = useState("");
  const [denied, setReadOnly] = useState(false);
  const readOnly = denied || !mayDecide;
  const now = useNow(1000);

  usePolling(
    async (signal) => {
      try {
        const res = await agent.listPendingRequests({ pageSize }, { signal, timeoutMs: callTimeoutMs });
        setEntries((prev) => merge(prev, res.requests, new Date()));
        setMore(res.nextPageToken !== "");
        setLoaded(true);
        setError("");
        return true;
      } catch (err) {
        if (signal.aborted) return false;
        const f = failure(err);
        setError(listError(f));
        return f.code !== Code.Unauthenticated && f.code !== Code.PermissionDenied;
      }
    },
    pollEvery,
    [agent],
  );

  const decide = useCallback(
    async (e: Entry, answer: Answer) => {
      const call = decision(e.req, answer);
      if (!call) return;
      const update = (f: (x: Entry) => Entry) => setEntries((prev) => prev.map((x) => (x.key === e.key ? f(x) : x)));
      update((x) => ({ ...x, phase: "deciding", error: "" }));
      try {
        await agent.decideRequests(call, { timeoutMs: callTimeoutMs });
        update((x) => ({ ...x, phase: "decided", notice: answered(answer) }));
      } catch (err) {
        const f = failure(err);
        if (f.code === Code.PermissionDenied) setReadOnly(true);
        update((x) => refused(x, f));
      }
    },
    [agent],
  );
  const dismiss = useCallback((e: Entry) => setEntries((prev) => prev.filter((x) => x.key !== e.key)), []);

  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);

  return (
    <main id="main">
      <h1 ref={heading} tabIndex={-1}>
        Inbox
      </h1>
      <p id="error" class="error" role="alert">
        {error}
      </p>
      {readOnly && (
        <p id="read-only" class="notice">
          This key may only read: deciding needs {decidingRoles}.
        </p>
      )}
      <p id="inbox-status" role="status">
        {loaded ? summary(entries, more) : error ? "" : "Loading the pending requests…"}
      </p>
      <ol id="inbox" class="inbox" aria-label="Pending requests">
        {entries.map((e) => (
          <RequestItem key={e.key} entry={e} now={now} readOnly={readOnly} onDecide={decide} onDismiss={dismiss} />
        ))}
      </ol>
    </main>
  );
}

function listError(f: Failure): string {
  switch (f.code) {
    case Code.Unauthenticated:
      return `agentd refused the key (${f.text}): sign out, and sign in with another.`;
    case Code.PermissionDenied:
      return `This key may not see the inbox, which needs ${decidingRoles} (${f.text}).`;
    default:
      return `The pending requests could not be read (${f.text}); trying again.`;
  }
}

function summary(entries: Entry[], more: boolean): string {
  const waiting = entries.filter((e) => e.phase === "pending" || e.phase === "deciding").length;
  const count =
    waiting === 0 ? "Nothing is pending." : waiting === 1 ? "1 request is pending." : `${waiting} requests are pending.`;
  return more ? `${count} Only the newest ${pageSize} are shown.` : count;
}
