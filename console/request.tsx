// One pending request as the inbox shows it. Every string in it comes
// from a model, a tool, an MCP server or a caller, and is rendered as
// text.
import type { ComponentChildren } from "preact";
import { useId, useState } from "preact/hooks";

import {
  AuthorizationReason,
  GenerationState,
  type AuthorizationRequest,
  type FunctionCall,
  type LimitReached,
  type PendingRequest,
  type SamplingApproval,
} from "../gen/ts/agentd/v1/agent_service_pb.js";
import { dateOf, instant, prettyJSON, span, webURL } from "./format.js";
import { InputBody } from "./inputform.js";
import { requestId, type Answer, type Entry } from "./pending.js";

export interface ItemProps {
  entry: Entry;
  now: Date;
  // The key may only read: no decision buttons.
  readOnly: boolean;
  // Deciding it resumes its paused generation: the buttons say so.
  resumes?: boolean;
  onDecide(entry: Entry, answer: Answer): void;
  onDismiss(entry: Entry): void;
}

export function RequestItem({ entry, now, readOnly, resumes, onDecide, onDismiss }: ItemProps) {
  const { req } = entry;
  const title = useId();
  return (
    <li
      class="request"
      data-testid="request"
      data-request-id={requestId(req)}
      data-generation-id={req.generationId}
      data-kind={kindName(req)}
      data-phase={entry.phase}
    >
      <article aria-labelledby={title}>
        <h2 id={title}>{heading(req)}</h2>
        <Facts req={req} now={now} />
        <Body entry={entry} readOnly={readOnly} onDecide={onDecide} />
        {decidable(entry, readOnly) && <Decision entry={entry} resumes={resumes} onDecide={onDecide} />}
        <Outcome entry={entry} onDismiss={onDismiss} />
      </article>
    </li>
  );
}

function kindName(req: PendingRequest): string {
  const r = req.request;
  switch (r.case) {
    case "approval":
      if (r.value.sampling) return "sampling";
      return r.value.limit ? "limit" : "approval";
    case "functionCall":
      return "function-call";
    case undefined:
      return "unknown";
    default:
      return r.case;
  }
}

function heading(req: PendingRequest): string {
  const r = req.request;
  switch (r.case) {
    case "approval":
      return r.value.prompt || `Allow ${r.value.toolName} to run?`;
    case "authorization":
      return `${r.value.serverName} needs authorization`;
    case "input":
      return `${r.value.serverName} asks for input`;
    case "functionCall":
      return `The function ${r.value.name} waits for the generation's client`;
    default:
      return "A request of a kind this console does not know";
  }
}

const kindLabels: Record<string, string> = {
  approval: "Tool call approval",
  sampling: "Sampling approval",
  limit: "Limit approval",
  authorization: "Authorization",
  input: "Input",
  "function-call": "Function call",
  unknown: "Unknown",
};

function Facts({ req, now }: { req: PendingRequest; now: Date }) {
  const r = req.request;
  const requested = dateOf(req.requestedAt);
  const expires = dateOf(req.expiresAt);
  const server = r.case === "functionCall" || r.case === undefined ? "" : r.value.serverName;
  const tool = r.case === "approval" ? r.value.toolName : "";
  return (
    <dl class="facts">
      <Fact name="Kind">{kindLabels[kindName(req)]}</Fact>
      <Fact name="Model">{[req.provider, req.model].filter(Boolean).join(" / ")}</Fact>
      {server && <Fact name="Server">{server}</Fact>}
      {tool && <Fact name="Tool">{tool}</Fact>}
      <Fact name="Started by">{req.startedBy}</Fact>
      <Fact name="For">{req.endUser}</Fact>
      {requested && (
        <Fact name="Waiting">
          <time dateTime={requested.toISOString()} title={instant(requested)} data-testid="waited">
            {span(now.getTime() - requested.getTime())}
          </time>
        </Fact>
      )}
      {expires && (
        <Fact name="Expires">
          <time dateTime={expires.toISOString()} title={instant(expires)} data-testid="expires">
            {expires > now ? `in ${span(expires.getTime() - now.getTime())}` : "now"}
          </time>
        </Fact>
      )}
      <Fact name="State">{stateName(req.state)}</Fact>
      <Fact name="Generation" wide>
        <code>{req.generationId}</code>
      </Fact>
    </dl>
  );
}

function Fact({ name, wide, children }: { name: string; wide?: boolean; children: ComponentChildren }) {
  return (
    <div class={wide ? "wide" : undefined}>
      <dt>{name}</dt>
      <dd>{children || "—"}</dd>
    </div>
  );
}

function stateName(s: GenerationState): string {
  if (s === GenerationState.WAITING) return "waiting on its client's stream";
  if (s === GenerationState.PAUSED) return "paused";
  return GenerationState[s]?.toLowerCase() ?? "";
}

function Body({ entry, readOnly, onDecide }: Pick<ItemProps, "entry" | "readOnly" | "onDecide">) {
  const r = entry.req.request;
  switch (r.case) {
    case "approval":
      if (r.value.sampling) return <Sampling s={r.value.sampling} />;
      return r.value.limit ? <Limit limit={r.value.limit} /> : <Arguments text={r.value.arguments} />;
    case "authorization":
      return <Authorization request={r.value} />;
    case "input":
      return (
        <InputBody
          request={r.value}
          answerable={!readOnly && pending(entry)}
          busy={entry.phase === "deciding"}
          error={entry.error}
          onAnswer={(a) => onDecide(entry, a)}
        />
      );
    case "functionCall":
      return <FunctionCallBody call={r.value} />;
    default:
      return null;
  }
}

function Arguments({ text }: { text: string }) {
  return (
    <section class="arguments">
      <h3>Arguments</h3>
      <pre data-testid="arguments">{prettyJSON(text)}</pre>
    </section>
  );
}

function Limit({ limit }: { limit: LimitReached }) {
  return (
    <section class="limit">
      <p data-testid="limit">
        {limit.name}: {limit.used.toString()} of {limit.value.toString()} {limit.unit.replaceAll("_", " ")} used;{" "}
        {limit.ceiling > 0n ? `it may be raised to at most ${limit.ceiling}.` : "the tenant sets no ceiling."}{" "}
        Approving without a value raises it by its first value again.
      </p>
    </section>
  );
}

function Sampling({ s }: { s: SamplingApproval }) {
  return (
    <section class="sampling">
      <h3>What the server asks the model</h3>
      {s.systemPrompt && (
        <>
          <h4>System prompt</h4>
          <pre data-testid="system-prompt">{s.systemPrompt}</pre>
        </>
      )}
      <ol class="messages" data-testid="sampling-messages">
        {s.messages.map((m, i) => (
          <li key={i}>
            <span class="role">{m.role}</span>
            <pre>{m.text}</pre>
          </li>
        ))}
      </ol>
      <p>
        At most {s.maxTokensGranted} tokens in the answer ({s.maxTokensRequested} asked for).
      </p>
    </section>
  );
}

const authorizationReasons: Record<AuthorizationReason, string> = {
  [AuthorizationReason.UNSPECIFIED]: "",
  [AuthorizationReason.FIRST_USE]: "agentd holds no token for this end user at this server.",
  [AuthorizationReason.STEP_UP]: "the server asks for more scopes than the token has.",
  [AuthorizationReason.REAUTHORIZE]: "the token was refused and could not be refreshed.",
};

function Authorization({ request }: { request: AuthorizationRequest }) {
  const url = webURL(request.url);
  const why = authorizationReasons[request.reason];
  return (
    <section class="authorization">
      {why && <p>Why: {why}</p>}
      {request.scopes.length > 0 && <p>Scopes: {request.scopes.join(" ")}</p>}
      {url ? (
        <p>
          <a href={url.href} target="_blank" rel="noopener noreferrer" data-testid="authorization-link">
            Open the authorization page at {url.host}
          </a>{" "}
          (a new tab). The authorization server then sends you to a redirect URL: answer this request with
          that URL, with the CLI or the API.
        </p>
      ) : (
        <p>
          The authorization URL is not a web address, so it is not a link: <code>{request.url}</code>
        </p>
      )}
    </section>
  );
}

function FunctionCallBody({ call }: { call: FunctionCall }) {
  return (
    <>
      <Arguments text={call.arguments} />
      <p data-testid="answer-elsewhere">Only the generation's client answers a function call, with its result.</p>
    </>
  );
}

function pending(entry: Entry): boolean {
  return entry.phase === "pending" || entry.phase === "deciding";
}

function decidable(entry: Entry, readOnly: boolean): boolean {
  return !readOnly && entry.req.request.case === "approval" && pending(entry);
}

function Decision({ entry, resumes, onDecide }: { entry: Entry; resumes?: boolean; onDecide: ItemProps["onDecide"] }) {
  const [reason, setReason] = useState("");
  const [raise, setRaise] = useState("");
  const field = useId();
  const raiseField = useId();
  const busy = entry.phase === "deciding";
  const r = entry.req.request;
  const limit = r.case === "approval" ? r.value.limit : undefined;
  const raiseTo = /^[0-9]+$/.test(raise) ? BigInt(raise) : 0n;
  return (
    <div class="decision" role="group" aria-label="Decision" aria-busy={busy}>
      {limit && (
        <>
          <label for={raiseField}>Raise to (optional, in {limit.unit.replaceAll("_", " ")})</label>
          <input
            id={raiseField}
            data-testid="raise-to"
            type="number"
            min={(limit.used + 1n).toString()}
            max={limit.ceiling > 0n ? limit.ceiling.toString() : undefined}
            value={raise}
            onInput={(e) => setRaise(e.currentTarget.value)}
          />
        </>
      )}
      <label for={field}>Reason (optional)</label>
      <input
        id={field}
        data-testid="reason"
        type="text"
        maxLength={1000}
        value={reason}
        onInput={(e) => setReason(e.currentTarget.value)}
      />
      <div class="buttons">
        <button
          type="button"
          data-testid="approve"
          disabled={busy}
          onClick={() =>
            onDecide(entry, { case: "approval", approved: true, reason, raiseTo: limit ? raiseTo : undefined })
          }
        >
          {resumes ? "Approve and resume" : "Approve"}
        </button>
        <button
          type="button"
          class="decline"
          data-testid="decline"
          disabled={busy}
          onClick={() => onDecide(entry, { case: "approval", approved: false, reason })}
        >
          {resumes ? "Decline and resume" : "Decline"}
        </button>
      </div>
      {entry.error && (
        <p class="error" role="alert" data-testid="decide-error">
          {entry.error}
        </p>
      )}
    </div>
  );
}

function Outcome({ entry, onDismiss }: { entry: Entry; onDismiss: ItemProps["onDismiss"] }) {
  if (entry.phase === "decided") {
    return (
      <p class="notice" role="status" data-testid="decided">
        {entry.notice}
      </p>
    );
  }
  if (entry.phase !== "gone") return null;
  return (
    <div class="notice gone">
      <p role="status" data-testid="decided-elsewhere">
        {entry.notice}
      </p>
      <button type="button" data-testid="dismiss" onClick={() => onDismiss(entry)}>
        Dismiss
      </button>
    </div>
  );
}
