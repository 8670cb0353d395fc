// Package policy holds the rules of the bridge's configuration that the
// server (validating a request up front, with an embedded bridge) and the
// bridge (enforcing its configuration when a session opens) apply alike:
// which commands a request may run, which environment variables it may not
// set, which addresses it may not reach, and how a request that breaks a
// rule is refused together with its other problems.
package policy

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/netaddr"
)

// Rules are the bridge's rules for what a request may declare:
// bridge.allowed_commands, bridge.allowed_env and
// bridge.allow_private_networks, or a tenant's own (tenants.<name>).
type Rules struct {
	AllowedCommands      []string
	AllowedEnv           []string
	AllowPrivateNetworks bool
	// Settings name where each rule comes from, for refusals to name.
	Settings Settings
}

// Settings name the configuration settings that Rules come from, such as
// "tenants.acme.allowed_commands". An empty name means the global one:
// bridge.allowed_commands, bridge.allowed_env,
// bridge.allow_private_networks.
type Settings struct {
	AllowedCommands, AllowedEnv, AllowPrivateNetworks string
}

// The global settings, named when Settings names none.
const (
	globalCommands = "bridge.allowed_commands"
	globalEnv      = "bridge.allowed_env"
	globalNetworks = "bridge.allow_private_networks"
)

func or(name, global string) string {
	if name == "" {
		return global
	}
	return name
}

// NetworksSetting names the setting that AllowPrivateNetworks comes from,
// for the bridge's refusal of an address it was about to dial.
func (r Rules) NetworksSetting() string {
	return or(r.Settings.AllowPrivateNetworks, globalNetworks)
}

// CommandRefusal says why a request may not run command, naming the
// setting that would allow it, or "" when it may.
func (r Rules) CommandRefusal(command string) string {
	if slices.Contains(r.AllowedCommands, command) {
		return ""
	}
	return fmt.Sprintf("the command %q is not allowed by %s; add it there, or register the server under bridge.servers and use ref", filepath.Base(command), or(r.Settings.AllowedCommands, globalCommands))
}

// EnvRefusals says why a request may not set each variable of env that it
// may not set (RefusedEnv), in order of the names.
func (r Rules) EnvRefusals(env map[string]string) []string {
	var out []string
	for _, name := range RefusedEnv(env, r.AllowedEnv) {
		out = append(out, EnvRefusal(name, or(r.Settings.AllowedEnv, globalEnv)))
	}
	return out
}

// AddressRefusal says why the bridge may not connect to a URL's host (a
// name or a literal address; names are checked again on the address
// dialled), naming the setting that would allow it, or "" when it may.
func (r Rules) AddressRefusal(host string) string {
	if r.AllowPrivateNetworks || !netaddr.PrivateHost(host) {
		return ""
	}
	return "its URL names localhost or a loopback, private, shared or link-local address, which " + r.NetworksSetting() + " does not allow"
}

// steeringEnv lists variables that steer the dynamic loader, an
// interpreter, a shell or a package manager: set by a request, they would
// let it run code of its choosing through an allowed command. Names ending
// in "_" are prefixes. Matching ignores case.
var steeringEnv = []string{
	"PATH", "HOME", "XDG_CONFIG_HOME", "TMPDIR", "IFS", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4",
	"LD_", "DYLD_", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "MALLOC_",
	"NODE_OPTIONS", "NODE_PATH", "NODE_EXTRA_CA_CERTS", "NPM_CONFIG_", "YARN_", "PNPM_", "COREPACK_",
	"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONINSPECT", "PIP_", "UV_", "VIRTUAL_ENV", "CONDA_",
	"PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYLIB", "RUBYOPT", "GEM_PATH", "GEM_HOME", "BUNDLE_",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
	"GOFLAGS", "GOPATH", "GOPROXY", "GOTOOLCHAIN", "CGO_",
	"DENO_", "BUN_", "DOTNET_", "LUA_PATH", "LUA_CPATH",
	"PYTHONWARNINGS", "BROWSER", "GIT_", "EDITOR", "VISUAL", "PAGER",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
}

// RefusedEnv returns, sorted, the names in a request's env that it may not
// set: those that steer how programs are found or loaded, unless allowed
// (bridge.allowed_env, or a tenant's) lists the exact name.
func RefusedEnv(env map[string]string, allowed []string) []string {
	var refused []string
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if steers(name) && !slices.Contains(allowed, name) {
			refused = append(refused, name)
		}
	}
	return refused
}

func steers(name string) bool {
	upper := strings.ToUpper(name)
	for _, s := range steeringEnv {
		if upper == s || strings.HasSuffix(s, "_") && strings.HasPrefix(upper, s) {
			return true
		}
	}
	return false
}

// EnvRefusal says why a request may not set the variable name, naming the
// setting that would allow it (bridge.allowed_env or a tenant's). It
// never quotes the value.
func EnvRefusal(name, setting string) string {
	return fmt.Sprintf("may not set %s, which steers how programs are found or loaded, unless %s lists it", name, setting)
}

// Refusal is the error that refuses a request, listing every problem as a
// field violation (google.rpc.BadRequest), invalid ones first: invalid
// problems make the request wrong whatever the configuration; denied ones
// are what the configuration does not allow, each naming its setting
// (bridge.allowed_env, bridge.allowed_commands,
// bridge.allow_private_networks, or a tenant's own). The code is InvalidArgument when there
// is any invalid problem, since the request must change anyway, and
// PermissionDenied when every problem is a denied one. Nil when there is
// no problem.
func Refusal(invalid, denied []fault.Violation) error {
	all := slices.Concat(invalid, denied)
	if len(all) == 0 {
		return nil
	}
	err := fault.InvalidRequest(all)
	if len(invalid) == 0 {
		parts := make([]string, len(all))
		for i, v := range all {
			parts[i] = v.Field + ": " + v.Description
		}
		err.Kind = fault.Permission
		err.Msg = "request not allowed by agentd's configuration: " + strings.Join(parts, "; ")
	}
	return err
}
