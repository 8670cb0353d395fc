// The MCP servers page: the registered servers, the stdio process pools
// and the tool-schema cache, as ListMCPServers reads them from the
// bridge, asked again every few seconds while the page is visible; and
// the cache's entries dropped from here, by those whose roles allow it.
// The tenant shown is in the URL (#/mcp?tenant=acme).
import type { ComponentChildren } from "preact";
import { useCallback, useState } from "preact/hooks";

import type {
  ListMCPServersResponse,
  ProcessPool,
  RegisteredServer,
  SchemaCache,
  SchemaCacheEntry,
} from "../gen/ts/agentd/v1/admin_service_pb.js";
import { failure } from "./api.js";
import { dateOf, instant, span } from "./format.js";
import type { PageProps } from "./main.js";
import { Page } from "./page.js";
import { useAdminRead, useNow } from "./poll.js";
import { href } from "./route.js";
import type { Caller } from "./session.js";

const pollEvery = 5_000;
const callTimeoutMs = 10_000;

// mayInvalidate: an admin drops any tenant's entries, a tenant_admin its
// own tenant's. Where agentd did not say who the caller is, the page
// offers the buttons and lets agentd refuse, as session.ts does.
function mayInvalidate(c: Caller, tenant: string): boolean {
  return !c.known || c.roles.includes("admin") || (c.roles.includes("tenant_admin") && c.tenant === tenant);
}

export function MCPServers({ admin, caller, query }: PageProps) {
  const [done, setDone] = useState("");
  const [round, setRound] = useState(0);
  const tenant = query.get("tenant") ?? "";
  const now = useNow(1000);
  const { data: listed, error } = useAdminRead(
    (signal) => admin.listMCPServers({}, { signal, timeoutMs: callTimeoutMs }),
    "ListMCPServers",
    pollEvery,
    [admin, round],
  );

  const invalidate = useCallback(
    async (what: { key?: string; tenant?: string }, label: string) => {
      setDone("");
      try {
        const res = await admin.invalidateSchemaCache(what, { timeoutMs: callTimeoutMs });
        setDone(`${label}: ${res.removed} ${res.removed === 1n ? "entry" : "entries"} dropped.`);
      } catch (err) {
        setDone(`${label} did not succeed (${failure(err).text}).`);
      }
      setRound((r) => r + 1);
    },
    [admin],
  );

  const shown = (t: string) => tenant === "" || t === tenant || t === "";

  return (
    <Page heading="MCP servers" error={error}>
      <p id="mcp-status" role="status">
        {done || (listed ? "" : error ? "" : "Loading…")}
      </p>
      {listed && (
        <>
          <TenantFilter tenants={tenantsOf(listed)} tenant={tenant} path="mcp" />
          <Servers servers={listed.servers.filter((s) => tenant === "" || s.tenants.length === 0 || s.tenants.includes(tenant))} />
          <Pools pools={listed.pools.filter((p) => shown(p.tenant))} open={listed.openSessions} />
          <Cache
            cache={listed.cache}
            entries={(listed.cache?.entries ?? []).filter((e) => shown(e.tenant))}
            tenant={tenant}
            now={now}
            may={(t) => mayInvalidate(caller, t)}
            onInvalidate={invalidate}
          />
        </>
      )}
    </Page>
  );
}

function tenantsOf(l: ListMCPServersResponse): string[] {
  const all = new Set<string>();
  for (const s of l.servers) s.tenants.forEach((t) => all.add(t));
  for (const p of l.pools) if (p.tenant) all.add(p.tenant);
  for (const e of l.cache?.entries ?? []) if (e.tenant) all.add(e.tenant);
  return [...all].sort();
}

// TenantFilter chooses the tenant the page at path shows, in the URL.
export function TenantFilter({ tenants, tenant, path }: { tenants: string[]; tenant: string; path: string }) {
  const choices = tenant && !tenants.includes(tenant) ? [tenant, ...tenants] : tenants;
  return (
    <div class="filter">
      <label for="tenant-filter">Tenant</label>
      <select id="tenant-filter" value={tenant} onChange={(e) => (location.hash = href(path, { tenant: e.currentTarget.value }))}>
        <option value="">Every tenant</option>
        {choices.map((t) => (
          <option key={t} value={t}>
            {t}
          </option>
        ))}
      </select>
    </div>
  );
}

// Table is a table that scrolls sideways on a narrow screen, by itself
// rather than the page, and can be scrolled with the keyboard.
function Table({ label, head, children }: { label: string; head: string[]; children: ComponentChildren }) {
  return (
    <div class="table" role="region" aria-label={label} tabIndex={0}>
      <table>
        <thead>
          <tr>
            {head.map((h) => (
              <th key={h} scope="col">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

function Servers({ servers }: { servers: RegisteredServer[] }) {
  return (
    <section aria-labelledby="servers-title">
      <h2 id="servers-title">Registered servers</h2>
      {servers.length === 0 ? (
        <p>No server is registered (bridge.servers).</p>
      ) : (
        <Table label="Registered servers" head={["Name", "Transport", "Target", "Processes", "Tenants"]}>
          {servers.map((s) => (
            <tr key={s.name} data-testid="server" data-name={s.name}>
              <th scope="row">{s.name}</th>
              <td>{s.transport}</td>
              <td>
                <code>{s.target}</code>
              </td>
              <td>{[s.shared ? "shared" : "one session each", s.perTenant ? "per tenant" : ""].filter(Boolean).join(", ")}</td>
              <td>{s.tenants.length > 0 ? s.tenants.join(", ") : "every tenant"}</td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}

function Pools({ pools, open }: { pools: ProcessPool[]; open: number }) {
  return (
    <section aria-labelledby="pools-title">
      <h2 id="pools-title">Process pools</h2>
      <p data-testid="open-sessions">
        {open === 1 ? "1 bridge session is open." : `${open} bridge sessions are open.`}
      </p>
      {pools.length === 0 ? (
        <p>No stdio server has a pool yet: a pool starts with its first session.</p>
      ) : (
        <Table
          label="Process pools"
          head={["Server", "Tenant", "Warm", "Busy", "Starting", "Most", "Spawned", "Retired", "Crashed", "Waits"]}
        >
          {pools.map((p) => (
            <tr key={p.key} data-testid="pool" data-server={p.serverName} data-tenant={p.tenant}>
              <th scope="row">{p.serverName}</th>
              <td>{p.tenant || "every tenant"}</td>
              <td>{p.warm}</td>
              <td>{p.busy}</td>
              <td>{p.starting}</td>
              <td>{p.maxProcesses || "no limit"}</td>
              <td>{String(p.spawned)}</td>
              <td>{String(p.retired)}</td>
              <td class={p.crashed > 0n ? "bad" : undefined}>{String(p.crashed)}</td>
              <td>{String(p.waits)}</td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}

interface CacheProps {
  cache?: SchemaCache;
  entries: SchemaCacheEntry[];
  tenant: string;
  now: Date;
  may(tenant: string): boolean;
  onInvalidate(what: { key?: string; tenant?: string }, label: string): void;
}

function Cache({ cache, entries, tenant, now, may, onInvalidate }: CacheProps) {
  if (!cache) return null;
  const ttl = cache.ttl ? Number(cache.ttl.seconds) * 1000 + cache.ttl.nanos / 1e6 : 0;
  const tenants = [...new Set(entries.map((e) => e.tenant))].filter((t) => (tenant === "" || t === tenant) && may(t));
  return (
    <section aria-labelledby="cache-title">
      <h2 id="cache-title">Tool-schema cache</h2>
      <dl class="facts" data-testid="cache-settings">
        <div>
          <dt>State</dt>
          <dd>{cache.enabled ? "on" : "off"}</dd>
        </div>
        <div>
          <dt>Kept for</dt>
          <dd>{ttl > 0 ? span(ttl) : "—"}</dd>
        </div>
        <div>
          <dt>Most entries</dt>
          <dd>{cache.maxEntries || "no limit"}</dd>
        </div>
        <div>
          <dt>Hits / misses</dt>
          <dd>
            {String(cache.hits)} / {String(cache.misses)}
          </dd>
        </div>
      </dl>
      {tenants.length > 0 && (
        <div class="buttons">
          {tenants.map((t) => (
            <button
              key={t}
              type="button"
              class="decline"
              data-testid="invalidate-tenant"
              data-tenant={t}
              onClick={() => onInvalidate({ tenant: t }, `Invalidating all of ${t || "the anonymous tenant"}`)}
            >
              Invalidate all of {t || "the anonymous tenant"}
            </button>
          ))}
        </div>
      )}
      {entries.length === 0 ? (
        <p>The cache holds no entry{tenant ? ` of ${tenant}` : ""}.</p>
      ) : (
        <Table label="Cache entries" head={["Server", "Tenant", "Revision", "Tools", "Written", "Expires", ""]}>
          {entries.map((e) => (
            <CacheRow key={e.key} entry={e} now={now} may={may(e.tenant)} onInvalidate={onInvalidate} />
          ))}
        </Table>
      )}
    </section>
  );
}

function CacheRow({ entry: e, now, may, onInvalidate }: { entry: SchemaCacheEntry; now: Date; may: boolean; onInvalidate: CacheProps["onInvalidate"] }) {
  const written = dateOf(e.writtenAt);
  const expires = dateOf(e.expiresAt);
  return (
    <tr data-testid="cache-entry" data-key={e.key} data-server={e.serverName} data-tenant={e.tenant}>
      <th scope="row">{e.serverName}</th>
      <td>{e.tenant || "—"}</td>
      <td>{String(e.revision)}</td>
      <td>{e.tools}</td>
      <td>{written && <time dateTime={written.toISOString()}>{instant(written)}</time>}</td>
      <td>
        {expires && (
          <time dateTime={expires.toISOString()} title={instant(expires)}>
            {expires > now ? `in ${span(expires.getTime() - now.getTime())}` : "expired"}
          </time>
        )}
      </td>
      <td>
        {may && (
          <button
            type="button"
            data-testid="invalidate"
            aria-label={`Invalidate ${e.serverName}${e.tenant ? ` of ${e.tenant}` : ""}`}
            onClick={() => onInvalidate({ key: e.key }, `Invalidating ${e.serverName}`)}
          >
            Invalidate
          </button>
        )}
      </td>
    </tr>
  );
}
