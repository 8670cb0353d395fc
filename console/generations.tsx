// The generations page: the tenant's generations, newest first, a page
// at a time, filtered by state, provider and model, end user and when
// they were created. The filters and the page are in the URL
// (#/generations?state=paused&page=TOKEN), so the browser's back button
// and a shared link show the same list.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { useEffect, useRef, useState } from "preact/hooks";

import { GenerationState, type Generation } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { failure, type Failure } from "./api.js";
import { dateOf, instant, span } from "./format.js";
import type { PageProps } from "./main.js";
import { Pager } from "./pager.js";
import { href } from "./route.js";
import { stateLabel } from "./states.js";

const pageSize = 50;

// The filters, as the URL's query names them.
const filterNames = ["state", "provider", "model", "end_user", "after", "before"] as const;
type Filters = Record<(typeof filterNames)[number], string>;

const stateOptions = ["running", "waiting", "paused", "queued", "completed", "failed", "cancelled"];

function filtersOf(query: URLSearchParams): Filters {
  return Object.fromEntries(filterNames.map((n) => [n, query.get(n) ?? ""])) as Filters;
}

interface Listed {
  generations: Generation[];
  next: string;
}

export function Generations({ agent, query }: PageProps) {
  const filters = filtersOf(query);
  const page = query.get("page") ?? "";
  const prev = query.getAll("prev");
  const [listed, setListed] = useState<Listed | undefined>();
  const [error, setError] = useState("");
  const asked = query.toString();

  useEffect(() => {
    const ctl = new AbortController();
    setError("");
    agent.listGenerations(listRequest(filters, page), { signal: ctl.signal, timeoutMs: 10_000 }).then(
      (res) => setListed({ generations: res.generations, next: res.nextPageToken }),
      (err) => ctl.signal.aborted || setError(listError(failure(err))),
    );
    return () => ctl.abort();
  }, [agent, asked]);

  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  const now = new Date();

  return (
    <main id="main" class="wide">
      <h1 ref={heading} tabIndex={-1}>
        Generations
      </h1>
      <FilterForm filters={filters} />
      <p id="error" class="error" role="alert">
        {error}
      </p>
      <p id="generations-status" role="status">
        {listed ? summary(listed, page) : error ? "" : "Loading the generations…"}
      </p>
      {listed && listed.generations.length > 0 && <Table generations={listed.generations} now={now} />}
      {listed && (
        <Pager path="generations" filters={filters} page={page} prev={prev} next={listed.next} label="Pages of generations" />
      )}
    </main>
  );
}

function listRequest(f: Filters, pageToken: string) {
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

function summary(l: Listed, page: string): string {
  const n = l.generations.length;
  if (n === 0) return page ? "No more generations." : "No generation matches.";
  const shown = n === 1 ? "1 generation" : `${n} generations`;
  return l.next ? `${shown} shown, newest first; there are more.` : `${shown} shown, newest first.`;
}

// FilterForm edits the filters and, when applied, puts them in the URL,
// from the first page.
function FilterForm({ filters }: { filters: Filters }) {
  const [f, setF] = useState(filters);
  const set = (name: keyof Filters) => (e: Event) => setF({ ...f, [name]: (e.currentTarget as HTMLInputElement).value });
  const apply = (e: Event) => {
    e.preventDefault();
    location.hash = href("generations", f);
  };
  return (
    <form class="filters" onSubmit={apply} aria-label="Filter the generations" data-testid="filters">
      <label>
        State
        <select name="state" value={f.state} onChange={set("state")}>
          <option value="">any</option>
          {stateOptions.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label>
        Provider
        <input name="provider" value={f.provider} onInput={set("provider")} />
      </label>
      <label>
        Model
        <input name="model" value={f.model} onInput={set("model")} />
      </label>
      <label>
        End user
        <input name="end_user" value={f.end_user} onInput={set("end_user")} />
      </label>
      <label>
        Created after
        <input name="after" type="datetime-local" value={f.after} onInput={set("after")} />
      </label>
      <label>
        Created before
        <input name="before" type="datetime-local" value={f.before} onInput={set("before")} />
      </label>
      <div class="buttons">
        <button type="submit" data-testid="apply">
          Apply
        </button>
        <a href="#/generations">Clear</a>
      </div>
    </form>
  );
}

function Table({ generations, now }: { generations: Generation[]; now: Date }) {
  return (
    <table class="list" data-testid="generations">
      <caption class="visually-hidden">Generations, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Generation</th>
          <th scope="col">State</th>
          <th scope="col">Provider / model</th>
          <th scope="col">Started by</th>
          <th scope="col">End user</th>
          <th scope="col">Created</th>
          <th scope="col">Duration</th>
        </tr>
      </thead>
      <tbody>
        {generations.map((g) => (
          <Row key={g.generationId} g={g} now={now} />
        ))}
      </tbody>
    </table>
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
