package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
)

// TestRefusedEnv: X-S1, X-D9. Every variable that steers how programs are
// found or loaded is refused, sorted, whatever its case, unless
// bridge.allowed_env lists its exact name.
func TestRefusedEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     []string
		allowed []string
		want    []string
	}{
		{"X-D9 every refused variable, sorted", []string{"NODE_OPTIONS", "LD_PRELOAD", "API_KEY", "PATH"}, nil, []string{"LD_PRELOAD", "NODE_OPTIONS", "PATH"}},
		{"prefixes", []string{"LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "NPM_CONFIG_REGISTRY", "GIT_SSH_COMMAND", "UV_INDEX_URL", "PIP_INDEX_URL"}, nil,
			[]string{"DYLD_INSERT_LIBRARIES", "GIT_SSH_COMMAND", "LD_LIBRARY_PATH", "NPM_CONFIG_REGISTRY", "PIP_INDEX_URL", "UV_INDEX_URL"}},
		{"case is ignored", []string{"pythonpath", "https_proxy"}, nil, []string{"https_proxy", "pythonpath"}},
		{"allowed_env lets exact names through", []string{"NODE_OPTIONS", "LD_PRELOAD"}, []string{"NODE_OPTIONS"}, []string{"LD_PRELOAD"}},
		{"allowed_env matches exact names only", []string{"node_options"}, []string{"NODE_OPTIONS"}, []string{"node_options"}},
		{"a name that only starts like one is not refused", []string{"PATHFINDER", "HOMEPAGE", "LDAP_URL", "MY_PATH"}, nil, nil},
		{"nothing set", nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := make(map[string]string)
			for _, name := range tc.env {
				env[name] = "value"
			}
			if diff := cmp.Diff(tc.want, RefusedEnv(env, tc.allowed)); diff != "" {
				t.Errorf("RefusedEnv(%v, %v) (-want +got):\n%s", tc.env, tc.allowed, diff)
			}
		})
	}
}

// TestRefusal: X-D9's rule. Every problem is a field violation, invalid
// ones first; any invalid one makes the request InvalidArgument, denied
// ones alone PermissionDenied.
func TestRefusal(t *testing.T) {
	t.Parallel()
	invalid := []fault.Violation{{Field: "a.read_timeout", Description: "must be positive"}}
	denied := []fault.Violation{
		{Field: "a.env", Description: EnvRefusal("LD_PRELOAD", "bridge.allowed_env")},
		{Field: "a.env", Description: EnvRefusal("NODE_OPTIONS", "bridge.allowed_env")},
	}
	tests := []struct {
		name            string
		invalid, denied []fault.Violation
		wantKind        fault.Kind
		want            []fault.Violation
	}{
		{"X-D9 invalid and denied: InvalidArgument, all listed", invalid, denied, fault.Invalid, append(append([]fault.Violation{}, invalid...), denied...)},
		{"X-D9 denied alone: PermissionDenied, all listed", nil, denied, fault.Permission, denied},
		{"invalid alone", invalid, nil, fault.Invalid, invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Refusal(tc.invalid, tc.denied)
			fe, ok := err.(*fault.Error)
			if !ok {
				t.Fatalf("Refusal = %v, want a *fault.Error", err)
			}
			if fe.Kind != tc.wantKind {
				t.Errorf("kind = %v, want %v", fe.Kind, tc.wantKind)
			}
			if diff := cmp.Diff(tc.want, fe.Violations); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			for _, v := range tc.want {
				if !strings.Contains(fe.Error(), v.Field+": "+v.Description) {
					t.Errorf("message %q does not list %s: %s", fe.Error(), v.Field, v.Description)
				}
			}
		})
	}
	if err := Refusal(nil, nil); err != nil {
		t.Errorf("Refusal(nil, nil) = %v, want nil", err)
	}
}

// TestRules: X-S1, X-S2, X-D9. A command runs only if listed exactly; a
// URL's host may not be private unless allowed; each refusal names the
// setting that would allow it, never a value.
func TestRules(t *testing.T) {
	t.Parallel()
	strict := Rules{AllowedCommands: []string{"/usr/bin/files-mcp"}}
	open := Rules{AllowedCommands: []string{"/usr/bin/files-mcp"}, AllowPrivateNetworks: true}
	for _, tc := range []struct {
		name  string
		got   string
		wants string // a word the refusal has; "" for none
	}{
		{"a listed command runs", strict.CommandRefusal("/usr/bin/files-mcp"), ""},
		{"an unlisted command names its base and the setting", strict.CommandRefusal("/opt/secret-dir/sh"), "bridge.allowed_commands"},
		{"a public host", strict.AddressRefusal("mcp.example.com"), ""},
		{"localhost", strict.AddressRefusal("localhost"), "bridge.allow_private_networks"},
		{"X-H5 the shared range", strict.AddressRefusal("100.64.1.2"), "bridge.allow_private_networks"},
		{"allow_private_networks lets it through", open.AddressRefusal("10.0.0.5"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.got == "") != (tc.wants == "") || !strings.Contains(tc.got, tc.wants) {
				t.Errorf("refusal %q; want one saying %q", tc.got, tc.wants)
			}
			if strings.Contains(tc.got, "secret-dir") {
				t.Errorf("refusal %q quotes the command's directory", tc.got)
			}
		})
	}
	if got := strict.EnvRefusals(map[string]string{"LD_PRELOAD": "x", "NODE_OPTIONS": "y", "API_KEY": "z"}); len(got) != 2 || !strings.Contains(got[0], "LD_PRELOAD") || !strings.Contains(got[1], "NODE_OPTIONS") {
		t.Errorf("EnvRefusals = %q; want LD_PRELOAD's, then NODE_OPTIONS'", got)
	}
}

// TestRulesNameTheirSettings: X-I7. Rules that a tenant sets itself
// (tenants.<name>) are named in their refusals as the tenant's settings;
// the others as the global ones.
func TestRulesNameTheirSettings(t *testing.T) {
	t.Parallel()
	tenant := Rules{Settings: Settings{AllowedCommands: "tenants.acme.allowed_commands", AllowedEnv: "tenants.acme.allowed_env", AllowPrivateNetworks: "tenants.acme.allow_private_networks"}}
	global := Rules{}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"X-I7 the tenant's allowed_commands", tenant.CommandRefusal("/usr/bin/x"), "tenants.acme.allowed_commands"},
		{"X-I7 the tenant's allowed_env", tenant.EnvRefusals(map[string]string{"PATH": "/x"})[0], "tenants.acme.allowed_env"},
		{"X-I7 the tenant's allow_private_networks", tenant.AddressRefusal("10.0.0.1"), "tenants.acme.allow_private_networks"},
		{"the tenant's, for the dial-time check", tenant.NetworksSetting(), "tenants.acme.allow_private_networks"},
		{"the global allowed_commands", global.CommandRefusal("/usr/bin/x"), "bridge.allowed_commands"},
		{"the global allowed_env", global.EnvRefusals(map[string]string{"PATH": "/x"})[0], "bridge.allowed_env"},
		{"the global allow_private_networks", global.NetworksSetting(), "bridge.allow_private_networks"},
	} {
		if !strings.Contains(tc.got, tc.want) {
			t.Errorf("%s: %q does not name %s", tc.name, tc.got, tc.want)
		}
	}
}
