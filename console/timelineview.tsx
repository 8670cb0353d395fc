// A generation's timeline as its page shows it. Everything in it (the
// model's text, a tool's arguments and output, a reason, a warning) is
// rendered as text.
import type { Duration } from "@bufbuild/protobuf/wkt";

import { StopReason, type ApprovalDecided, type Cost, type Usage } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { dateOf, instant, prettyJSON, span } from "./format.js";
import { href } from "./route.js";
import type { Entry, Request } from "./timeline.js";

export function TimelineView({ entries }: { entries: Entry[] }) {
  return (
    <ol id="timeline" class="timeline" aria-label="Timeline">
      {entries.map((e) => (
        <li key={e.key} data-testid="event" data-kind={e.kind} data-seq={e.seq || undefined}>
          <EntryView e={e} />
        </li>
      ))}
    </ol>
  );
}

function EntryView({ e }: { e: Entry }) {
  switch (e.kind) {
    case "started":
      return <Started resumed={e.started.resumed} adopted={e.started.adopted} tools={e.started.tools.length} />;
    case "queued":
      return (
        <p>
          Queued behind <a href={href(`generations/${encodeURIComponent(e.behind)}`)}>{e.behind}</a>, which holds its
          thread.
        </p>
      );
    case "text":
      return (
        <>
          <p class="what">The model</p>
          <pre class="text" data-testid="text">
            {e.text}
          </pre>
        </>
      );
    case "tool":
      return <Tool e={e} />;
    case "provider-tool":
      return (
        <>
          <p class="what">
            The provider called {e.call.serverName} / {e.call.toolName}
            {e.call.isError && " (it failed)"}
          </p>
          <Code label="Arguments" text={prettyJSON(e.call.arguments)} testid="arguments" />
          <Code label="Output" text={e.call.output} testid="output" />
        </>
      );
    case "request":
      return <RequestView request={e.request} decided={e.decided} />;
    case "decided":
      return <Decided d={e.decided} />;
    case "usage":
      return <p class="what">{usageText(e.usage)}</p>;
    case "warning":
      return (
        <p class="warning" data-testid="warning">
          Warning <code>{e.warning.code}</code>: {e.warning.message}
          {e.warning.serverName && ` (${[e.warning.serverName, e.warning.toolName].filter(Boolean).join(" / ")})`}
        </p>
      );
    case "withdrawn":
      return (
        <p class="notice">
          Turn {e.turn} was withdrawn ({e.reason || "its replica stopped"}): what it said is left out, and the turn is asked
          again.
        </p>
      );
    case "paused":
      return <p class="what">Paused, for the requests above to be answered.</p>;
    case "completed":
      return (
        <p class="what">
          Completed{stopText(e.completed.stopReason)} after {e.completed.toolTurns} tool{" "}
          {e.completed.toolTurns === 1 ? "turn" : "turns"}
          {e.completed.usage && `; ${usageText(e.completed.usage, "in all")}`}.
        </p>
      );
  }
}

function Started({ resumed, adopted, tools }: { resumed: boolean; adopted: boolean; tools: number }) {
  const how = adopted ? "Taken over by another replica" : resumed ? "Resumed" : "Started";
  return (
    <p class="what">
      {how}, with {tools} {tools === 1 ? "tool" : "tools"}.
    </p>
  );
}

function Tool({ e }: { e: Extract<Entry, { kind: "tool" }> }) {
  const { call, finished, progress } = e;
  const where = [call.serverName, call.toolName].filter(Boolean).join(" / ");
  return (
    <>
      <p class="what">
        Tool call: <code>{where}</code>
        {finished ? `, ${finished.isError ? "failed" : "finished"} in ${took(finished.duration)}` : ", running"}
        {progress && !finished && ` (${progressText(progress.progress, progress.total, progress.message)})`}
      </p>
      {call.arguments && <Code label="Arguments" text={prettyJSON(call.arguments)} testid="arguments" />}
      {finished && <Code label={finished.isError ? "Error" : "Output"} text={finished.output} testid="output" />}
    </>
  );
}

function RequestView({ request, decided }: { request: Request; decided?: ApprovalDecided }) {
  return (
    <>
      <p class="what">{requestTitle(request)}</p>
      {request.case === "approval" && !request.value.sampling && (
        <Code label="Arguments" text={prettyJSON(request.value.arguments)} testid="arguments" />
      )}
      {decided ? <Decided d={decided} /> : <p class="muted">Not answered yet.</p>}
    </>
  );
}

function requestTitle(r: Request): string {
  switch (r.case) {
    case "approval":
      return r.value.sampling
        ? `${r.value.serverName} asks to sample the model: approval needed`
        : `Approval needed to call ${r.value.serverName} / ${r.value.toolName}`;
    case "authorization":
      return `${r.value.serverName} needs authorization`;
    case "input":
      return `${r.value.serverName} asks for input${r.value.message ? `: ${r.value.message}` : ""}`;
    case "functionCall":
      return `The function ${r.value.name} waits for the generation's client`;
  }
}

function Decided({ d }: { d: ApprovalDecided }) {
  const at = dateOf(d.decidedAt);
  return (
    <p class="decided" data-testid="decided-by">
      {d.approved ? "Approved" : "Declined"} by {d.decidedBy || "a caller without authentication"}
      {at && ` at ${instant(at)}`}
      {d.reason && `: ${d.reason}`}
    </p>
  );
}

function Code({ label, text, testid }: { label: string; text: string; testid: string }) {
  return (
    <details open>
      <summary>{label}</summary>
      <pre data-testid={testid}>{text}</pre>
    </details>
  );
}

function usageText(u: Usage, what = `turn ${u.turn}`): string {
  const cached = u.cacheReadInputTokens > 0n ? `, ${u.cacheReadInputTokens} read from cache` : "";
  return `Tokens, ${what}: ${u.inputTokens} in${cached}, ${u.outputTokens} out${costText(u.cost)}`;
}

// costText says what the tokens cost, from billionths of the currency's
// unit, exactly (a bigint never rounds); nothing without a price table.
function costText(c: Cost | undefined): string {
  if (!c) return "";
  if (c.unknown) return "; cost unknown (no price for this model)";
  const nanos = c.nanos.toString().padStart(10, "0");
  const whole = nanos.slice(0, -9);
  const fraction = nanos.slice(-9).replace(/0+$/, "").padEnd(2, "0");
  return `; cost ${whole}.${fraction} ${c.currency}`;
}

function stopText(r: StopReason): string {
  return r === StopReason.UNSPECIFIED ? "" : ` (${StopReason[r].toLowerCase().replace(/_/g, " ")})`;
}

function progressText(progress: number, total: number, message: string): string {
  const done = total > 0 ? `${Math.round((progress / total) * 100)} %` : String(progress);
  return message ? `${done}: ${message}` : done;
}

// took writes a tool call's duration: milliseconds under a second.
export function took(d: Duration | undefined): string {
  if (!d) return "—";
  const ms = Number(d.seconds) * 1000 + d.nanos / 1e6;
  return ms < 1000 ? `${Math.round(ms)} ms` : span(ms);
}
