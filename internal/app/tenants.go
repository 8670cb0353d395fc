package app

import (
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/providers/registry"
	"github.com/agentd/agentd/server"
)

// tenants resolves a caller's tenant to its settings as the AgentService
// uses them, each built once at start: the global settings, and
// each configured tenant's (tenants.<name>, merged over the global ones by
// config.ForTenant).
type tenants struct {
	global *server.Tenant
	byName map[string]*server.Tenant
}

// newTenants builds the tenants' settings of cfg with their provider
// registries regs. The rules are known only of an embedded bridge: a
// remote one holds its own configuration and refuses what it does not
// allow. The registered servers a tenant may use are agentd's to check
// either way, since agentd resolves a ref to a url server itself
// (server.Options.Registered) and the bridge never sees the ref.
func newTenants(cfg *config.Config, regs *registry.Tenants, embedded bool) *tenants {
	t := &tenants{
		global: &server.Tenant{Providers: regs.Global(), Limits: quota.Configured(cfg.Limits, "", nil), Budgets: budgetsOf(cfg, ""), GenerationLimits: &cfg.GenerationLimits},
		byName: make(map[string]*server.Tenant, len(cfg.Tenants)),
	}
	if embedded {
		rules := cfg.Bridge.Rules()
		t.global.Rules = &rules
	}
	for name, own := range cfg.Tenants {
		settings, _ := cfg.ForTenant(name)
		st := &server.Tenant{Providers: regs.For(name), Limits: quota.Configured(cfg.Limits, name, own.Limits), Budgets: budgetsOf(cfg, name), GenerationLimits: &settings.GenerationLimits}
		if embedded {
			st.Rules = &settings.Rules
		}
		st.Servers, st.ServersSetting = settings.Servers, "tenants."+name+".servers"
		st.ProvidersSetting = "tenants." + name + ".providers"
		t.byName[name] = st
	}
	return t
}

// lookup is server.Options.Tenants. The tenant "" (callers without
// authentication, or with tenants unconfigured) gets the global settings;
// with tenants configured, another tenant gets its own, else
// tenants.default's, else is refused.
func (t *tenants) lookup(name string) (*server.Tenant, bool) {
	if name == "" || len(t.byName) == 0 {
		return t.global, true
	}
	if st, ok := t.byName[name]; ok {
		return st, true
	}
	st, ok := t.byName[config.DefaultTenant]
	return st, ok
}

// budgetsOf are the budgets the configuration writes for tenant name
// (checked when it was loaded).
func budgetsOf(cfg *config.Config, name string) []*budget.Budget {
	ts, _ := cfg.ForTenant(name)
	budgets, _ := config.Budgets(ts.Budgets, name, ts.BudgetsKey)
	return budgets
}
