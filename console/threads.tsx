// The threads pages: the tenant's threads, newest first, a page at a
// time, optionally those whose metadata has one entry; and a thread's
// items as the conversation they are (the user's, the assistant's and
// the tools' messages), every word of it rendered as text.
import { Code } from "@connectrpc/connect";
import { useEffect, useRef, useState } from "preact/hooks";

import type { Thread, ThreadItem } from "../gen/ts/agentd/v1/thread_pb.js";
import { failure, type Failure } from "./api.js";
import { dateOf, instant } from "./format.js";
import type { PageProps } from "./main.js";
import { Pager } from "./pager.js";
import { href } from "./route.js";
import { MessageView } from "./message.js";

const pageSize = 50;
const itemsPerRead = 100;
const callTimeoutMs = 10_000;

export function Threads({ agent, query }: PageProps) {
  const filters = { key: query.get("key") ?? "", value: query.get("value") ?? "" };
  const page = query.get("page") ?? "";
  const [listed, setListed] = useState<{ threads: Thread[]; next: string } | undefined>();
  const [error, setError] = useState("");
  const asked = query.toString();

  useEffect(() => {
    const ctl = new AbortController();
    setError("");
    const metadata = filters.key ? { [filters.key]: filters.value } : {};
    agent.listThreads({ metadata, pageSize, pageToken: page }, { signal: ctl.signal, timeoutMs: callTimeoutMs }).then(
      (res) => setListed({ threads: res.threads, next: res.nextPageToken }),
      (err) => ctl.signal.aborted || setError(readError("threads", failure(err))),
    );
    return () => ctl.abort();
  }, [agent, asked]);

  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  const n = listed?.threads.length ?? 0;
  return (
    <main id="main" class="wide">
      <h1 ref={heading} tabIndex={-1}>
        Threads
      </h1>
      <MetadataForm filters={filters} />
      <p id="error" class="error" role="alert">
        {error}
      </p>
      <p id="threads-status" role="status">
        {listed ? (n === 0 ? (page ? "No more threads." : "No thread matches.") : `${n} ${n === 1 ? "thread" : "threads"} shown, newest first.`) : error ? "" : "Loading the threads…"}
      </p>
      {n > 0 && <ThreadTable threads={listed!.threads} />}
      {listed && (
        <Pager path="threads" filters={filters} page={page} prev={query.getAll("prev")} next={listed.next} label="Pages of threads" />
      )}
    </main>
  );
}

function readError(what: string, f: Failure): string {
  switch (f.code) {
    case Code.Unauthenticated:
      return `agentd refused the key (${f.text}): sign out, and sign in with another.`;
    case Code.PermissionDenied:
      return `This key may not read the ${what} (${f.text}).`;
    case Code.NotFound:
      return `There is no such thread of your tenant (${f.text}).`;
    default:
      return `The ${what} could not be read (${f.text}).`;
  }
}

function MetadataForm({ filters }: { filters: { key: string; value: string } }) {
  const [f, setF] = useState(filters);
  const apply = (e: Event) => {
    e.preventDefault();
    location.hash = href("threads", f.key ? f : {});
  };
  return (
    <form class="filters" onSubmit={apply} aria-label="Filter the threads by metadata" data-testid="filters">
      <label>
        Metadata key
        <input name="key" value={f.key} onInput={(e) => setF({ ...f, key: e.currentTarget.value })} />
      </label>
      <label>
        Value
        <input name="value" value={f.value} onInput={(e) => setF({ ...f, value: e.currentTarget.value })} />
      </label>
      <div class="buttons">
        <button type="submit" data-testid="apply">
          Apply
        </button>
        <a href="#/threads">Clear</a>
      </div>
    </form>
  );
}

function ThreadTable({ threads }: { threads: Thread[] }) {
  return (
    <table class="list" data-testid="threads">
      <caption class="visually-hidden">Threads, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Thread</th>
          <th scope="col">Items</th>
          <th scope="col">Metadata</th>
          <th scope="col">Updated</th>
          <th scope="col">Running now</th>
        </tr>
      </thead>
      <tbody>
        {threads.map((t) => {
          const updated = dateOf(t.updatedAt);
          return (
            <tr key={t.threadId} data-testid="thread-row" data-thread-id={t.threadId}>
              <td data-label="Thread">
                <a href={href(`threads/${encodeURIComponent(t.threadId)}`)}>
                  <code>{t.threadId}</code>
                </a>
              </td>
              <td data-label="Items">{String(t.itemCount)}</td>
              <td data-label="Metadata">{metadataText(t.metadata) || "—"}</td>
              <td data-label="Updated">{updated ? <time dateTime={updated.toISOString()}>{instant(updated)}</time> : "—"}</td>
              <td data-label="Running now">{t.activeGenerationId ? <GenerationLink id={t.activeGenerationId} /> : "—"}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function metadataText(m: Record<string, string>): string {
  return Object.entries(m)
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

function GenerationLink({ id }: { id: string }) {
  return (
    <a href={href(`generations/${encodeURIComponent(id)}`)}>
      <code>{id}</code>
    </a>
  );
}

// ThreadPage shows a thread and its items, oldest first, a hundred at a
// time ("Show more" reads the next).
export function ThreadPage({ agent, params }: PageProps) {
  const id = params.id;
  const [thread, setThread] = useState<Thread | undefined>();
  const [items, setItems] = useState<ThreadItem[]>([]);
  const [next, setNext] = useState<string | undefined>("");
  const [error, setError] = useState("");

  const read = async (token: string, signal?: AbortSignal) => {
    try {
      const res = await agent.listThreadItems({ threadId: id, pageSize: itemsPerRead, pageToken: token }, { signal, timeoutMs: callTimeoutMs });
      setItems((prev) => (token ? [...prev, ...res.items] : res.items));
      setNext(res.nextPageToken || undefined);
    } catch (err) {
      if (!signal?.aborted) setError(readError("thread's items", failure(err)));
    }
  };
  useEffect(() => {
    const ctl = new AbortController();
    agent.getThread({ threadId: id }, { signal: ctl.signal, timeoutMs: callTimeoutMs }).then(
      (res) => setThread(res.thread),
      (err) => ctl.signal.aborted || setError(readError("thread", failure(err))),
    );
    void read("", ctl.signal);
    return () => ctl.abort();
  }, [agent, id]);

  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  return (
    <main id="main">
      <h1 ref={heading} tabIndex={-1}>
        Thread <code>{id}</code>
      </h1>
      <p id="error" class="error" role="alert">
        {error}
      </p>
      {thread && <ThreadFacts thread={thread} />}
      <h2>Conversation</h2>
      <ol class="conversation" data-testid="conversation" aria-label="Conversation">
        {items.map((it, i) => (
          <li key={it.itemId} data-testid="item" data-role={roleOf(it)}>
            {it.generationId && it.generationId !== items[i - 1]?.generationId && (
              <p class="from">
                From <GenerationLink id={it.generationId} />:
              </p>
            )}
            <MessageView message={it.message} />
          </li>
        ))}
      </ol>
      {next && (
        <button type="button" data-testid="more" onClick={() => void read(next)}>
          Show more
        </button>
      )}
    </main>
  );
}

function roleOf(it: ThreadItem): string {
  return ["", "user", "assistant", "tool"][it.message?.role ?? 0] ?? "";
}

function ThreadFacts({ thread }: { thread: Thread }) {
  const created = dateOf(thread.createdAt);
  const expires = dateOf(thread.expiresAt);
  return (
    <dl class="facts">
      <div>
        <dt>Items</dt>
        <dd>{String(thread.itemCount)}</dd>
      </div>
      <div>
        <dt>Created</dt>
        <dd>{created ? instant(created) : "—"}</dd>
      </div>
      <div>
        <dt>Expires</dt>
        <dd>{expires ? instant(expires) : "never"}</dd>
      </div>
      <div>
        <dt>Running now</dt>
        <dd>{thread.activeGenerationId ? <GenerationLink id={thread.activeGenerationId} /> : "—"}</dd>
      </div>
      <div class="wide">
        <dt>Metadata</dt>
        <dd>{metadataText(thread.metadata) || "—"}</dd>
      </div>
    </dl>
  );
}
