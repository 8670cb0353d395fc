package bridge

import (
	"slices"
	"strings"
)

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

// steering reports whether a request may not set variable name, given the
// names the configuration allows.
func steering(name string, allowed []string) bool {
	if slices.Contains(allowed, name) {
		return false
	}
	upper := strings.ToUpper(name)
	for _, s := range steeringEnv {
		if upper == s || strings.HasSuffix(s, "_") && strings.HasPrefix(upper, s) {
			return true
		}
	}
	return false
}
