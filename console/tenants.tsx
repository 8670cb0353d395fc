// The tenants page: each tenant's limits beside what it uses of them now
// (ListTenants, read from the store every replica shares), as figures
// ("3 / 10") with a bar beside each, one tenant to a card so that a
// phone shows them one under another. The tenant shown is in the URL
// (#/tenants?tenant=acme).
import type { TenantLimits, TenantOverview, TenantUsage } from "../gen/ts/agentd/v1/admin_service_pb.js";
import type { PageProps } from "./main.js";
import { TenantFilter } from "./mcp.js";
import { Page } from "./page.js";
import { useAdminRead } from "./poll.js";

const pollEvery = 5_000;
const callTimeoutMs = 10_000;

export function Tenants({ admin, query }: PageProps) {
  const tenant = query.get("tenant") ?? "";
  const { data, error } = useAdminRead(
    (signal) => admin.listTenants({}, { signal, timeoutMs: callTimeoutMs }),
    "ListTenants",
    pollEvery,
    [admin],
  );
  const tenants = data?.tenants;

  const shown = (tenants ?? []).filter((t) => tenant === "" || t.name === tenant);

  return (
    <Page heading="Tenants" error={error}>
      <p id="tenants-status" role="status">
        {tenants ? (shown.length === 0 ? "No tenant to show." : "") : error ? "" : "Loading…"}
      </p>
      {tenants && tenants.length > 1 && (
        <TenantFilter tenants={tenants.map((t) => t.name)} tenant={tenant} path="tenants" />
      )}
      <ul class="tenants">
        {shown.map((t) => (
          <TenantCard key={t.name} tenant={t} />
        ))}
      </ul>
    </Page>
  );
}

// A use is one of a tenant's limits beside its usage: limit 0 is no
// limit, undefined a use no setting limits.
interface Use {
  id: string;
  label: string;
  used: number;
  limit?: number;
  unit: string;
}

function usesOf(l: TenantLimits | undefined, u: TenantUsage | undefined): Use[] {
  return [
    { id: "running", label: "Running generations", used: u?.runningGenerations ?? 0, limit: l?.maxConcurrentGenerations ?? 0, unit: "running" },
    { id: "paused", label: "Paused generations", used: u?.pausedGenerations ?? 0, limit: l?.maxPausedGenerations ?? 0, unit: "paused" },
    { id: "queued", label: "Queued behind their threads", used: u?.queuedGenerations ?? 0, unit: "queued" },
    { id: "per-minute", label: "Started in the last minute", used: u?.generationsLastMinute ?? 0, limit: l?.generationsPerMinute ?? 0, unit: "started" },
    { id: "threads", label: "Threads", used: u?.threads ?? 0, limit: l?.maxThreads ?? 0, unit: "threads" },
    { id: "thread-items", label: "Items in its largest thread", used: u?.largestThreadItems ?? 0, limit: l?.maxThreadItems ?? 0, unit: "items" },
  ];
}

function TenantCard({ tenant }: { tenant: TenantOverview }) {
  const title = `tenant-${tenant.name}`;
  return (
    <li class="tenant" data-testid="tenant" data-name={tenant.name}>
      <article aria-labelledby={title}>
        <h2 id={title}>{tenant.name}</h2>
        <dl class="uses">
          {usesOf(tenant.limits, tenant.usage).map((u) => (
            <UseRow key={u.id} use={u} />
          ))}
        </dl>
      </article>
    </li>
  );
}

// UseRow is a use as text (what a screen reader says, and what the test
// reads) and as a bar that only repeats it for the eye.
function UseRow({ use: u }: { use: Use }) {
  const limited = u.limit !== undefined && u.limit > 0;
  const share = limited ? Math.min(1, u.used / u.limit!) : 0;
  const level = !limited ? "none" : share >= 1 ? "full" : share >= 0.8 ? "high" : "ok";
  return (
    <div class="use" data-testid={`use-${u.id}`} data-level={level}>
      <dt>{u.label}</dt>
      <dd>
        <span class="figure">{figure(u)}</span>
        {limited && (
          <span class="bar" aria-hidden="true">
            <span style={{ width: `${Math.round(share * 100)}%` }} />
          </span>
        )}
      </dd>
    </div>
  );
}

function figure(u: Use): string {
  if (u.limit === undefined) return `${u.used} ${u.unit}`;
  return u.limit > 0 ? `${u.used} / ${u.limit} ${u.unit}` : `${u.used} ${u.unit} (no limit)`;
}
