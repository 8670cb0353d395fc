// A generation's page: what it is (state, model, who started it and for
// whom, its thread and trace), its timeline live while it runs, what it
// waits for (decided here as in the inbox), and a cancel button for
// those who may cancel it.
import { Code } from "@connectrpc/connect";
import type { ComponentChildren } from "preact";
import { useCallback, useState } from "preact/hooks";

import { GenerationState, type Generation } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { codeName, failure, type Agent } from "./api.js";
import { useFollow } from "./follow.js";
import { dateOf, instant, span } from "./format.js";
import { useNow } from "./poll.js";
import type { PageProps } from "./main.js";
import { Page } from "./page.js";
import { answered, decision, refused, type Answer, type Entry } from "./pending.js";
import { RequestItem } from "./request.js";
import { href } from "./route.js";
import { mayCancel, mayDecide, type Config } from "./session.js";
import { finished, stateLabel } from "./states.js";
import type { Entry as TimelineEntry } from "./timeline.js";
import { TimelineView } from "./timelineview.js";
import { entriesOf } from "./waiting.js";

const callTimeoutMs = 10_000;

export function GenerationPage({ agent, caller, config, params }: PageProps) {
  const id = params.id;
  const { gen, timeline, error, refresh } = useFollow(agent, id);
  const traceId = gen?.traceId || lastTraceId(timeline.entries);

  return (
    <Page
      heading={
        <>
          Generation <code>{id}</code>
        </>
      }
      error={error}
    >
      {gen && <Facts gen={gen} traceId={traceId} config={config} />}
      {gen && !finished(gen.state) && mayCancel(caller) && <Cancel agent={agent} id={id} onCancelled={refresh} />}
      {gen && <Waiting agent={agent} gen={gen} readOnly={!mayDecide(caller)} onDecided={refresh} />}
      <section aria-labelledby="timeline-heading">
        <h2 id="timeline-heading">Timeline</h2>
        <TimelineView entries={timeline.entries} />
        {gen && <Outcome gen={gen} />}
      </section>
    </Page>
  );
}

// lastTraceId is the trace id of the generation's latest start (a
// resume runs under a trace of its own).
function lastTraceId(entries: TimelineEntry[]): string {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i];
    if (e.kind === "started" && e.started.traceId) return e.started.traceId;
  }
  return "";
}

function Facts({ gen, traceId, config }: { gen: Generation; traceId: string; config: Config }) {
  const created = dateOf(gen.createdAt);
  const ended = dateOf(gen.finishedAt);
  return (
    <dl class="facts" data-testid="facts">
      <Fact name="State">
        <span data-testid="state">{stateLabel(gen.state)}</span>
      </Fact>
      <Fact name="Provider / model">{[gen.provider, gen.model].filter(Boolean).join(" / ")}</Fact>
      <Fact name="Started by">{gen.startedBy}</Fact>
      <Fact name="End user">{gen.endUser}</Fact>
      <Fact name="Created">{created && <time dateTime={created.toISOString()}>{instant(created)}</time>}</Fact>
      <Fact name={ended ? "Took" : "Running for"}>
        {ended && created ? span(ended.getTime() - created.getTime()) : created && span(Date.now() - created.getTime())}
      </Fact>
      <Fact name="Thread">
        {gen.threadId && (
          <a href={href(`threads/${encodeURIComponent(gen.threadId)}`)}>
            <code>{gen.threadId}</code>
          </a>
        )}
      </Fact>
      <Fact name="Trace">{traceId && <Trace id={traceId} template={config.traceURL} />}</Fact>
    </dl>
  );
}

function Fact({ name, children }: { name: string; children: ComponentChildren }) {
  return (
    <div>
      <dt>{name}</dt>
      <dd>{children || "—"}</dd>
    </div>
  );
}

// Trace is the trace id, a link into the trace viewer when
// console.trace_url names one. agentd checked that it is an http or https
// URL; the id is put in as a URL component.
function Trace({ id, template }: { id: string; template: string }) {
  if (!template) return <code data-testid="trace-id">{id}</code>;
  return (
    <a href={template.replaceAll("{trace_id}", encodeURIComponent(id))} target="_blank" rel="noopener noreferrer" data-testid="trace-id">
      <code>{id}</code>
    </a>
  );
}

// Waiting lists what the generation waits for, decidable as in the inbox;
// deciding a paused one's last request resumes it, as its button says.
function Waiting({ agent, gen, readOnly, onDecided }: { agent: Agent; gen: Generation; readOnly: boolean; onDecided(): void }) {
  const [done, setDone] = useState(() => new Map<string, Entry>());
  const now = useNow(1000);
  const entries = entriesOf(gen, done);
  const open = entries.filter((e) => e.phase === "pending" || e.phase === "deciding");
  const resumes = gen.state === GenerationState.PAUSED && open.length === 1;
  const keep = (e: Entry) => setDone((m) => new Map(m).set(e.key.slice(gen.generationId.length + 1), e));

  const decide = useCallback(
    async (e: Entry, answer: Answer) => {
      const call = decision(e.req, answer);
      if (!call) return;
      keep({ ...e, phase: "deciding", error: "" });
      try {
        await agent.decideRequests(call, { timeoutMs: callTimeoutMs });
        keep({ ...e, phase: "decided", notice: answered(answer) });
      } catch (err) {
        keep(refused(e, failure(err)));
      }
      onDecided();
    },
    [agent, gen.generationId],
  );
  const dismiss = useCallback((e: Entry) => keep({ ...e, phase: "decided", notice: "" }), [gen.generationId]);

  if (entries.length === 0) return null;
  return (
    <section aria-labelledby="waiting-heading">
      <h2 id="waiting-heading">It waits for</h2>
      {readOnly && (
        <p class="notice" data-testid="read-only">
          Deciding needs the role "approve" or "generate"; this key may only watch.
        </p>
      )}
      <ol class="inbox" aria-label="Pending requests" data-testid="waiting">
        {entries.map((e) => (
          <RequestItem key={e.key} entry={e} now={now} readOnly={readOnly} resumes={resumes} onDecide={decide} onDismiss={dismiss} />
        ))}
      </ol>
    </section>
  );
}

function Cancel({ agent, id, onCancelled }: { agent: Agent; id: string; onCancelled(): void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const cancel = async () => {
    setBusy(true);
    setError("");
    try {
      await agent.cancelGeneration({ generationId: id, reason: "cancelled in the console" }, { timeoutMs: callTimeoutMs });
      onCancelled();
    } catch (err) {
      const f = failure(err);
      setError(
        f.code === Code.Unimplemented
          ? `This agentd cannot cancel a generation from the console (${f.text}).`
          : `The generation was not cancelled (${f.text}).`,
      );
    }
    setBusy(false);
  };
  return (
    <div class="cancel">
      <button type="button" class="decline" data-testid="cancel" disabled={busy} onClick={cancel}>
        Cancel this generation
      </button>
      {error && (
        <p class="error" role="alert" data-testid="cancel-error">
          {error}
        </p>
      )}
    </div>
  );
}

// Outcome says how the generation stands now: paused, or how it ended
// (a failure with its gRPC code and agentd's message).
function Outcome({ gen }: { gen: Generation }) {
  const state = stateLabel(gen.state);
  const expires = dateOf(gen.expiresAt);
  let text: string;
  switch (gen.state) {
    case GenerationState.COMPLETED:
      text = "It completed.";
      break;
    case GenerationState.FAILED:
    case GenerationState.CANCELLED:
      text = `It ${gen.state === GenerationState.FAILED ? "failed" : "was cancelled"}: ${codeName(gen.errorCode as Code)}${gen.errorMessage ? `: ${gen.errorMessage}` : ""}.`;
      break;
    case GenerationState.PAUSED:
      text = `It is paused until its requests are answered${expires ? `, at the latest ${instant(expires)}` : ""}.`;
      break;
    default:
      text = `It is ${state}.`;
  }
  return (
    <p class={`outcome ${state}`} role="status" data-testid="outcome" data-state={state}>
      {text}
    </p>
  );
}
