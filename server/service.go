package server

import (
	"time"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/oauthclient"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
)

// Bridge opens bridge sessions. internal/bridgeclient implements it over
// gRPC; tests may use any fake.
type Bridge interface {
	// OpenSession opens a session for one generation. The session lives
	// until its Close, or until ctx ends, whichever comes first. Safe for
	// concurrent use. answers answers what the session's servers ask of
	// agentd while it is open; nil refuses every such request.
	OpenSession(ctx context.Context, req *bridgev1.OpenSessionRequest, answers bridgeclient.Answerer) (bridgeclient.Session, error)
}

// Options configures a Service.
type Options struct {
	// Logger receives one line per generation end, its pauses and
	// resumes, approval decisions, and what goes wrong in the background.
	Logger *slog.Logger
	// Providers are the provider adapters requests may name, for every
	// tenant that Tenants gives none of its own.
	Providers *providers.Registry
	// Bridge runs the bridged MCP servers.
	Bridge Bridge
	// Config holds the tool loop's defaults and limits.
	Config config.Generation
	// Rules are the bridge's rules for what a request may declare
	// (commands, env, private addresses), when agentd knows them: those of
	// its embedded bridge. Validation then refuses what they refuse up
	// front, with the request's other problems. Nil with a remote bridge,
	// whose configuration may differ: that bridge reports every refusal
	// itself, at once, when the session opens.
	Rules *policy.Rules
	// TracerProvider makes the spans of model turns and tool calls; nil
	// means none.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics of model turns, generations and
	// tool calls; nil means none.
	MeterProvider metric.MeterProvider
	// Checkpoints stores paused generations; nil means generations cannot
	// pause (they fail when they would).
	Checkpoints store.Checkpoints
	// Generations records every generation from its start with its
	// event log, under a lease that Replica holds; nil keeps no
	// record (events carry no sequence numbers).
	Generations store.Generations
	// Threads keeps the conversations generations run on, in the same
	// store as Generations; nil keeps none (thread calls are
	// FAILED_PRECONDITION).
	Threads store.Threads
	// ThreadRetention is how long a thread without an expiry of its own
	// is kept after its last change (threads.retention); 0 for ever.
	ThreadRetention time.Duration
	// Prices prices each model call's tokens (agentd's price table); nil
	// prices none, and usage carries no cost.
	Prices Pricer
	// Replica is this agentd's replica id: the owner of the leases of the
	// generations it runs. Required with Generations.
	Replica string
	// Sealer seals the agent in a running generation's checkpoints
	// (store.encryption_key_file), so that another replica can adopt it
	// with its secrets, and opens what its previous keys sealed
	// (store.previous_encryption_key_files); nil stores the agent without
	// them.
	Sealer *sealer.Keyring
	// Tenants returns the settings of the caller's tenant (auth.Caller's;
	// "" without authentication), and false for a tenant that may not be
	// served (one the configuration does not know): its calls are
	// PermissionDenied. Nil serves every tenant with Providers and Rules,
	// unlimited.
	Tenants func(tenant string) (*Tenant, bool)
	// OAuth makes agentd the OAuth client of url servers declared with
	// oauth.
	OAuth oauthclient.Options
	// Budgets keeps the budgets set through the admin API, what each
	// budget's subjects spent, and the usage ledger, in the store every
	// replica shares. Nil: model calls are held to no budget and the
	// ledger is not written.
	Budgets store.Budgets
	// Registered are the url servers registered under bridge.servers, by
	// name, as the declarations a ref: to one stands for: url, headers,
	// authorization, read_timeout and oauth, secrets included. agentd
	// resolves such a ref itself (it is the server's OAuth client) and
	// the bridge connects to it as to a url the request declared; a ref
	// to any other name goes to the bridge as it is. Nil: none.
	Registered map[string]*agentdv1.MCPServer
}

// Tenant is what one tenant's generations use: its provider keys,
// its rules, the registered servers it may use, and its limits. A
// generation uses its own tenant's, never another's.
type Tenant struct {
	// Providers are its provider adapters, configured with its keys and
	// base URLs. Nil: Options.Providers.
	Providers *providers.Registry
	// Rules are what its requests may declare, as the embedded bridge
	// checks them for this tenant; nil with a remote bridge (see
	// Options.Rules).
	Rules *policy.Rules
	// Servers lists the registered servers (bridge.servers) it may use
	// with ref:, when the configuration restricts them; nil: all of them.
	Servers []string
	// ServersSetting names the setting that lists Servers, for the error
	// of a ref: beyond it (e.g. "tenants.acme.servers").
	ServersSetting string
	// ProvidersSetting names the setting of its own provider keys, for
	// the error of a request for a provider without one (e.g.
	// "tenants.acme.providers"); "" where tenants are not configured.
	ProvidersSetting string
	// Limits are its limits.
	Limits quota.Limits
	// Budgets are its budgets written in the configuration (budgets, or
	// tenants.<name>.budgets), beside those set through the admin API
	// (Options.Budgets).
	Budgets []*budget.Budget
	// GenerationLimits bound each of its generations: the defaults of
	// what an agent sets none of, the ceilings of what it sets; where
	// they set no default of max_tool_turns, Options.Config's is it. Nil:
	// config.Default()'s.
	GenerationLimits *config.GenerationLimits
}

// Service implements agentd.v1.AgentService.
type Service struct {
	agentdv1.UnimplementedAgentServiceServer

	log         *slog.Logger
	providers   *providers.Registry
	bridge      Bridge
	cfg         config.Generation
	rules       *policy.Rules
	tracer      trace.Tracer
	meters      *meters
	approvals   *approvalMeters
	checkpoints store.Checkpoints
	generations store.Generations
	threads     store.Threads
	// threadRetention is Options.ThreadRetention.
	threadRetention time.Duration
	prices          Pricer
	spending        *spending // nil without Options.Budgets
	ledgerOn        atomic.Bool
	// adoptNow wakes the adopter before its interval: a generation
	// queued on a thread may have become adoptable.
	adoptNow chan struct{}
	replica  string
	// live holds the journals of the generations this replica runs, for
	// attached streams to follow in memory; events reads their logs.
	live    record.Live
	events  *record.Log
	tenants func(string) (*Tenant, bool)
	limiter *quota.Limiter
	// pauseMu makes counting a tenant's paused generations and storing
	// one more a single step, against max_paused_generations.
	pauseMu sync.Mutex
	sealer  *sealer.Keyring

	// The generations that run without a client (detached, adopted) and
	// the adopter are owned by the Service: bg ends them, Close joins them.
	bg       context.Context
	bgCancel context.CancelCauseFunc
	bgWG     sync.WaitGroup
	// stopping is set once agentd stops: a generation that ends because
	// of it releases its lease for another replica to adopt at once,
	// rather than being recorded as cancelled.
	stopping atomic.Bool
	bgMu     sync.Mutex
	bgClosed bool
	bgRuns   atomic.Int64 // clientless generations running (detached, adopted)

	oauth          *oauthclient.Client
	registered     map[string]*agentdv1.MCPServer
	authorizations atomic.Int64 // numbers authorization requests
	inputs         atomic.Int64 // numbers input requests
	// deciding holds the generations that run here with a durable
	// record, for the decisions made here to reach them (decided.go).
	deciding sync.Map
	// toolLists are the bridged servers' tool lists made for the model,
	// by schema-cache revision, shared by the generations that list them.
	toolLists *toolLists
	// blocks holds, by tenant and generation, the encoded events that
	// the event streams following it share (*genBlocks).
	blocks sync.Map
}

// New returns a Service.
func New(opts Options) *Service {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	bg, bgCancel := context.WithCancelCause(context.Background())
	s := &Service{
		bg:              bg,
		bgCancel:        bgCancel,
		sealer:          opts.Sealer,
		log:             log,
		providers:       opts.Providers,
		bridge:          opts.Bridge,
		cfg:             opts.Config,
		rules:           opts.Rules,
		tracer:          tp.Tracer("github.com/agentd/agentd/server"),
		meters:          newMeters(opts.MeterProvider),
		approvals:       newApprovalMeters(opts.MeterProvider),
		checkpoints:     opts.Checkpoints,
		generations:     opts.Generations,
		threads:         opts.Threads,
		threadRetention: opts.ThreadRetention,
		prices:          opts.Prices,
		spending:        newSpendingOf(opts.Budgets, log),
		adoptNow:        make(chan struct{}, 1),
		replica:         opts.Replica,
		tenants:         opts.Tenants,
		limiter:         quota.New(),
		oauth:           oauthclient.New(opts.OAuth, log),
		registered:      opts.Registered,
		toolLists:       newToolLists(),
	}
	s.events = &record.Log{Store: s.generations, Live: &s.live, Adopt: s.adoptOne, Stopping: s.stopping.Load}
	// A request's id is its generation's once, on every replica that runs
	// it (its decision is recorded by it): each agentd numbers them from
	// a start of its own.
	s.authorizations.Store(rand.Int64N(1 << 32))
	s.inputs.Store(rand.Int64N(1 << 32))
	return s
}

// tenant returns the settings of the caller's tenant in ctx, or
// PermissionDenied for a tenant the configuration does not serve. The
// authenticator refuses such a caller already; this does not rely on it.
func (s *Service) tenant(ctx context.Context) (string, *Tenant, error) {
	return s.tenantNamed(tenantOf(ctx))
}

// tenantNamed returns the settings of the tenant name.
func (s *Service) tenantNamed(name string) (string, *Tenant, error) {
	if s.tenants == nil {
		return name, &Tenant{Providers: s.providers, Rules: s.rules}, nil
	}
	t, ok := s.tenants(name)
	if !ok {
		return name, nil, fault.New(fault.Permission, "the tenant %q is not configured (tenants), and there is no tenants.%s for it", name, config.DefaultTenant)
	}
	if t.Providers == nil {
		own := *t
		own.Providers = s.providers
		t = &own
	}
	return name, t, nil
}

// tenantOf is the tenant of the caller in ctx: its API key's, or, without
// authentication, the one tenant every caller shares (""). A generation
// belongs to its tenant: another tenant's resume finds nothing, and its
// MCP servers' tool lists are cached apart.
func tenantOf(ctx context.Context) string {
	_, tenant := auth.Caller(ctx)
	return tenant
}

// Register registers the service on srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	agentdv1.RegisterAgentServiceServer(srv, s)
}

// goBackground runs f owned by the Service (Close joins it), unless the
// Service is closing.
func (s *Service) goBackground(f func()) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return false
	}
	s.bgWG.Go(f)
	return true
}

// Drain marks the Service as stopping: from now on, a generation that
// ends because agentd stops (its client's stream cut by the server's
// stop, or a background one) releases its lease for another replica to
// adopt at once, and nothing new is adopted here.
func (s *Service) Drain() { s.stopping.Store(true) }

// Close stops the adopter and the generations running without a client,
// releasing their leases for other replicas to adopt, and waits for them.
// Idempotent.
func (s *Service) Close() {
	s.Drain()
	s.bgMu.Lock()
	closed := s.bgClosed
	s.bgClosed = true
	s.bgMu.Unlock()
	if !closed && s.generations != nil {
		// The shutdown's step, with how many generations it stops
		// here for another replica to continue (each is logged too).
		s.log.Info("stopping: handing the generations running without a client over to other replicas", "generations", s.bgRuns.Load())
	}
	s.bgCancel(errStopping)
	s.bgWG.Wait()
	s.closeLedger()
}

// errStopping ends the generations that run without a client when agentd
// stops: their leases are released for another replica to adopt.
var errStopping = fault.New(fault.Unavailable, "agentd is stopping; another replica continues the generation: attach there")
