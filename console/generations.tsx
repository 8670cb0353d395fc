// The generations page: the tenant's generations, newest first, a page
// at a time, filtered by state, provider and model, end user and when
// they were created. The filters and the page are in the URL
// (#/generations?state=paused&page=TOKEN), so the browser's back button
// and a shared link show the same list.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";

import {
  GenerationState,
  type Generation,
  type ListGenerationsResponse,
} from "../gen/ts/agentd/v1/agent_service_pb.js";
import type { Failure } from "./api.js";
import { dateOf, instant, span } from "./format.js";
import type { PageProps } from "./main.js";
import { Filters, Listing, Table, type Field } from "./list.js";
import { Page, useAnswer } from "./page.js";
import { href } from "./route.js";
import { stateLabel } from "./states.js";

const pageSize = 50;

// The filters, as the URL's query names them.
const fields: Field[] = [
  { name: "state", label: "State", options: ["running", "waiting", "paused", "queued", "completed", "failed", "cancelled"] },
  { name: "provider", label: "Provider" },
  { name: "model", label: "Model" },
  { name: "end_user", label: "End user" },
  { name: "after", label: "Created after", type: "datetime-local" },
  { name: "before", label: "Created before", type: "datetime-local" },
];
type Chosen = Record<"state" | "provider" | "model" | "end_user" | "after" | "before", string>;

export function Generations({ agent, query }: PageProps) {
  const filters = Object.fromEntries(fields.map((f) => [f.name, query.get(f.name) ?? ""])) as Chosen;
  const page = query.get("page") ?? "";
  const { answer, failed } = useAnswer(
    (signal) => agent.listGenerations(listRequest(filters, page), { signal, timeoutMs: 10_000 }),
    query.toString(),
  );
  const error = failed ? listError(failed) : "";
  const status = answer ? summary(answer, page) : error ? "" : "Loading the generations…";
  return (
    <Page heading="Generations" wide error={error}>
      <Filters path="generations" label="Filter the generations" fields={fields} values={filters} />
      <Listing path="generations" filters={filters} query={query} status={status} next={answer?.nextPageToken} label="Pages of generations">
        {answer && answer.generations.length > 0 && <GenerationTable generations={answer.generations} now={new Date()} />}
      </Listing>
    </Page>
  );
}

function listRequest(f: Chosen, pageToken: string) {
  const state = GenerationState[f.state.toUpperCase() as keyof typeof GenerationState];
  const at = (v: string) => (v && !Number.isNaN(new Date(v).getTime()) ? timestampFromDate(new Date(v)) : undefined);
  return {
    pageSize,
    pageToken,
    states: typeof state === "number" ? [state] : [],
    provider: f.provider,
    model: f.model,
    endUser: f.end_user,
    createdAfter: at(f.after),
    createdBefore: at(f.before),
  };
}

function listError(f: Failure): string {
  switch (f.code) {
    case Code.Unauthenticated:
      return `agentd refused the key (${f.text}): sign out, and sign in with another.`;
    case Code.PermissionDenied:
      return `This key may not list the generations (${f.text}).`;
    case Code.InvalidArgument:
      return `agentd refused these filters (${f.text}).`;
    default:
      return `The generations could not be read (${f.text}).`;
  }
}

function summary(l: ListGenerationsResponse, page: string): string {
  const n = l.generations.length;
  if (n === 0) return page ? "No more generations." : "No generation matches.";
  const shown = n === 1 ? "1 generation" : `${n} generations`;
  return l.nextPageToken ? `${shown} shown, newest first; there are more.` : `${shown} shown, newest first.`;
}

const columns = ["Generation", "State", "Provider / model", "Started by", "End user", "Created", "Duration"];

function GenerationTable({ generations, now }: { generations: Generation[]; now: Date }) {
  return (
    <Table caption="Generations, newest first" columns={columns} testid="generations">
      {generations.map((g) => (
        <Row key={g.generationId} g={g} now={now} />
      ))}
    </Table>
  );
}

function Row({ g, now }: { g: Generation; now: Date }) {
  const created = dateOf(g.createdAt);
  const finished = dateOf(g.finishedAt);
  const took = created && span((finished ?? now).getTime() - created.getTime());
  return (
    <tr data-testid="generation-row" data-generation-id={g.generationId} data-state={stateLabel(g.state)}>
      <td data-label="Generation">
        <a href={href(`generations/${encodeURIComponent(g.generationId)}`)}>
          <code>{g.generationId}</code>
        </a>
      </td>
      <td data-label="State">{stateLabel(g.state)}</td>
      <td data-label="Provider / model">{[g.provider, g.model].filter(Boolean).join(" / ") || "—"}</td>
      <td data-label="Started by">{g.startedBy || "—"}</td>
      <td data-label="End user">{g.endUser || "—"}</td>
      <td data-label="Created">
        {created ? <time dateTime={created.toISOString()}>{instant(created)}</time> : "—"}
      </td>
      <td data-label="Duration">{took ? (finished ? took : `${took} so far`) : "—"}</td>
    </tr>
  );
}
