package registry

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/providertest"
)

// Every declared provider is served under its name, with the in-process
// ones and the router, and nothing else is.
func TestNew(t *testing.T) {
	t.Parallel()
	reg, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mock", "router", "script"}
	for _, a := range Declared {
		want = append(want, a.Name)
	}
	slices.Sort(want)
	if got := reg.Names(); !slices.Equal(got, want) {
		t.Errorf("registered %q, want %q", got, want)
	}
	for _, a := range Declared {
		if p, _ := reg.Lookup(a.Name); p == nil || p.Name() != a.Name {
			t.Errorf("%q is served by %v, an adapter of another name", a.Name, p)
		}
	}
}

// A request made without a key names the variable the provider's
// declaration gives, and sends nothing; only a provider that needs no
// key (Ollama) sends the request.
func TestMissingKeyNamesItsVariable(t *testing.T) {
	t.Parallel()
	for _, a := range Declared {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				requests.Add(1)
				http.Error(w, `{"error":{"message":"no"}}`, http.StatusInternalServerError)
			}))
			defer srv.Close()
			p := a.New(a.Settings(config.Provider{BaseURL: srv.URL, MaxRetries: -1}))
			req := &providers.Request{Model: "m", Messages: []*agentdv1.Message{{
				Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}},
			}}}
			err := providertest.FirstError(t.Context(), p, req)
			// What the stream fails with, a generation is refused with
			// before it starts.
			var checked error
			if c, ok := p.(providers.ConfigChecker); ok {
				checked = c.CheckConfig(req.Model)
			}
			if fault.KindOf(err) == fault.FailedPrecondition && (checked == nil || checked.Error() != err.Error()) {
				t.Errorf("CheckConfig = %v; want the stream's error, %v", checked, err)
			}
			if fault.KindOf(err) != fault.FailedPrecondition {
				if checked != nil {
					t.Errorf("CheckConfig = %v for a provider that sent the request", checked)
				}
				if requests.Load() == 0 {
					t.Errorf("error %v without a request; want a FailedPrecondition for the missing key", err)
				}
				return
			}
			want := "set " + a.Key + " or providers." + a.Name + ".api_key"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q; want it to say %q", err, want)
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("%d requests sent without a key", n)
			}
		})
	}
}

// Every registered adapter passes the shared checks: no secret in its
// errors, and its streams fail alike (X-H4).
func TestSharedChecks(t *testing.T) {
	t.Parallel()
	for _, a := range Declared {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			providertest.CheckSecrets(t, func(baseURL, key string) providers.Provider {
				return a.New(providers.Settings{APIKey: key, BaseURL: baseURL, MaxRetries: -1})
			})
			providertest.CheckStreamFailures(t, a.New)
		})
	}
}

// X-I7: a tenant's generations use its own provider key and base URL
// where it set one (tenants.<name>.providers), never another tenant's,
// and the global settings for a provider it left alone.
func TestTenants(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string // "path authorization" of each request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, `{"error":{"message":"no"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	cfg := config.Default()
	cfg.Providers = map[string]config.Provider{"openai": {APIKey: "sk-global", BaseURL: srv.URL + "/global", MaxRetries: -1}}
	cfg.Tenants = map[string]config.Tenant{
		"acme":    {Providers: map[string]config.Provider{"openai": {APIKey: "sk-acme"}}},
		"globex":  {Providers: map[string]config.Provider{"openai": {BaseURL: srv.URL + "/globex"}, "anthropic": {APIKey: "sk-globex-anthropic"}}},
		"initech": {},
	}
	regs, err := NewTenants(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer regs.CloseIdleConnections()
	for _, tc := range []struct{ tenant, want string }{
		{"acme", "/global/chat/completions Bearer sk-acme"},
		{"globex", "/globex/chat/completions Bearer sk-global"},
		{"initech", "/global/chat/completions Bearer sk-global"},
		{"unconfigured", "/global/chat/completions Bearer sk-global"},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		p, _ := regs.For(tc.tenant).Lookup("openai")
		req := &providers.Request{Model: "m", Messages: []*agentdv1.Message{{
			Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}},
		}}}
		_ = providertest.FirstError(t.Context(), p, req)
		mu.Lock()
		got := slices.Clone(seen)
		mu.Unlock()
		if !slices.Equal(got, []string{tc.want}) {
			t.Errorf("X-I7 %s's openai request: %q; want %q", tc.tenant, got, tc.want)
		}
	}
	if regs.For("initech") != regs.Global() {
		t.Error("a tenant with no provider of its own got a registry of its own")
	}
}

// A tenant's provider names are checked as the global ones are, naming
// the tenant's setting.
func TestTenantUnknownProvider(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Tenants = map[string]config.Tenant{"acme": {Providers: map[string]config.Provider{"opneai": {APIKey: "k"}}}}
	want := "tenants.acme.providers.opneai: unknown provider; one of anthropic,"
	if _, err := NewTenants(&cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewTenants = %v; want %q", err, want)
	}
}
