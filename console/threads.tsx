// The threads pages: the tenant's threads, newest first, a page at a
// time, optionally those whose metadata has one entry; and a thread's
// items as the conversation they are (the user's, the assistant's and
// the tools' messages), every word of it rendered as text.
import { Code } from "@connectrpc/connect";
import { useEffect, useState } from "preact/hooks";

import type { Thread, ThreadItem } from "../gen/ts/agentd/v1/thread_pb.js";
import { failure, type Failure } from "./api.js";
import { dateOf, instant } from "./format.js";
import type { PageProps } from "./main.js";
import { MessageView } from "./message.js";
import { Page, useAnswer } from "./page.js";
import { Filters, Listing, Table, type Field } from "./list.js";
import { href } from "./route.js";

const pageSize = 50;
const itemsPerRead = 100;
const callTimeoutMs = 10_000;

const fields: Field[] = [
  { name: "key", label: "Metadata key" },
  { name: "value", label: "Value" },
];

export function Threads({ agent, query }: PageProps) {
  const filters = { key: query.get("key") ?? "", value: query.get("value") ?? "" };
  const page = query.get("page") ?? "";
  const metadata = filters.key ? { [filters.key]: filters.value } : {};
  const { answer, failed } = useAnswer(
    (signal) => agent.listThreads({ metadata, pageSize, pageToken: page }, { signal, timeoutMs: callTimeoutMs }),
    query.toString(),
  );
  const error = failed ? readError("threads", failed) : "";
  const status = answer ? summary(answer.threads.length, page) : error ? "" : "Loading the threads…";
  return (
    <Page heading="Threads" wide error={error}>
      <Filters path="threads" label="Filter the threads by metadata" fields={fields} values={filters} />
      <Listing path="threads" filters={filters} query={query} status={status} next={answer?.nextPageToken} label="Pages of threads">
        {answer && answer.threads.length > 0 && <ThreadTable threads={answer.threads} />}
      </Listing>
    </Page>
  );
}

function summary(n: number, page: string): string {
  if (n === 0) return page ? "No more threads." : "No thread matches.";
  return `${n} ${n === 1 ? "thread" : "threads"} shown, newest first.`;
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

function ThreadTable({ threads }: { threads: Thread[] }) {
  return (
    <Table caption="Threads, newest first" columns={["Thread", "Items", "Metadata", "Updated", "Running now"]} testid="threads">
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
    </Table>
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
  const { answer, failed } = useAnswer((signal) => agent.getThread({ threadId: id }, { signal, timeoutMs: callTimeoutMs }), id);
  const items = useItems(agent, id);
  const error = failed ? readError("thread", failed) : items.error;
  return (
    <Page
      heading={
        <>
          Thread <code>{id}</code>
        </>
      }
      error={error}
    >
      {answer?.thread && <ThreadFacts thread={answer.thread} />}
      <h2>Conversation</h2>
      <ol class="conversation" data-testid="conversation" aria-label="Conversation">
        {items.items.map((it, i) => (
          <li key={it.itemId} data-testid="item" data-role={roleOf(it)}>
            {it.generationId && it.generationId !== items.items[i - 1]?.generationId && (
              <p class="from">
                From <GenerationLink id={it.generationId} />:
              </p>
            )}
            <MessageView message={it.message} />
          </li>
        ))}
      </ol>
      {items.more && (
        <button type="button" data-testid="more" onClick={items.more}>
          Show more
        </button>
      )}
    </Page>
  );
}

// useItems reads a thread's items, oldest first, a hundred at a time:
// more, when there are more, reads the next hundred.
function useItems(agent: PageProps["agent"], id: string) {
  const [items, setItems] = useState<ThreadItem[]>([]);
  const [next, setNext] = useState("");
  const [error, setError] = useState("");
  const read = async (token: string, signal?: AbortSignal) => {
    try {
      const res = await agent.listThreadItems({ threadId: id, pageSize: itemsPerRead, pageToken: token }, { signal, timeoutMs: callTimeoutMs });
      setItems((prev) => (token ? [...prev, ...res.items] : res.items));
      setNext(res.nextPageToken);
    } catch (err) {
      if (!signal?.aborted) setError(readError("thread's items", failure(err)));
    }
  };
  useEffect(() => {
    const ctl = new AbortController();
    void read("", ctl.signal);
    return () => ctl.abort();
  }, [agent, id]);
  return { items, error, more: next ? () => void read(next) : undefined };
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
