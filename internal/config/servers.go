package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/mcpdecl"
)

// Server is an MCP server registered in the configuration: a stdio
// server (command) that the bridge starts, or a remote one (url) over
// Streamable HTTP. Exactly one of command and url is set.
type Server struct {
	// Command is the executable ("@self" for agentd itself).
	Command string `yaml:"command"`
	// Args are its arguments, in order.
	Args []string `yaml:"args"`
	// Env is added to its environment.
	Env map[string]string `yaml:"env"`
	// Shared lets one process serve many sessions at once, for servers
	// whose tools keep no per-session state: true, one process per tenant
	// serves all of that tenant's sessions; global, one process serves
	// every tenant's; false, a process serves one session, then retires.
	Shared Shared `yaml:"shared" enum:"false,true,global"`
	// Warm replaces bridge.pool.warm for this server.
	Warm *int `yaml:"warm" inherit:"bridge.pool.warm"`
	// MaxProcesses replaces bridge.pool.max_processes for this server
	// (0: keeps it).
	MaxProcesses int `yaml:"max_processes" inherit:"bridge.pool.max_processes"`

	// The settings below are a url server's; args, env, shared, warm and
	// max_processes are a command server's only. `agentd serve` resolves
	// a ref: to a url server from its own configuration (it is the
	// server's OAuth client), and its bridge connects as to a url the
	// request declared: the tenant's allow_private_networks applies.

	// URL is the server's http or https Streamable HTTP endpoint. Its
	// path and query are secret, like a request's url.
	URL string `yaml:"url"`
	// Headers are added to every request to it. Values are secret.
	Headers map[string]string `yaml:"headers"`
	// Authorization is a static credential sent as the Authorization
	// header (a bare token gets "Bearer "). Secret. Excludes oauth.
	Authorization string `yaml:"authorization"`
	// AuthorizationFile names a file holding authorization instead (read
	// at start; surrounding white space is dropped), which keeps it out
	// of the configuration (a mounted secret, for instance).
	AuthorizationFile string `yaml:"authorization_file"`
	// ReadTimeout bounds each wait for its answers, at most 1h; a
	// request's read_timeout beside the ref: replaces it.
	ReadTimeout time.Duration `yaml:"read_timeout" default:"a request's default"`
	// OAuth makes agentd the server's OAuth client, as a request's oauth
	// declaration does; its tokens are kept per tenant, end user and
	// server URL.
	OAuth *ServerOAuth `yaml:"oauth"`
}

// ServerOAuth is a registered url server's OAuth client (the request's
// oauth declaration, agentd.v1.OAuthClient, in configuration form).
type ServerOAuth struct {
	// Grant is the OAuth grant: authorization_code (a person authorizes
	// on the Generate stream), client_credentials (agentd itself) or
	// enterprise_managed (the ID token of oauth.identity_provider's
	// id_token_file exchanged there; nobody is asked).
	Grant string `yaml:"grant" enum:",authorization_code,client_credentials,enterprise_managed" default:"authorization_code"`
	// ClientID is the pre-registered client's id. Required with
	// client_credentials and with a secret or key; without one agentd
	// uses its client ID metadata document or registers dynamically.
	ClientID string `yaml:"client_id"`
	// ClientSecret authenticates client_id (client_secret_basic or
	// client_secret_post). Secret.
	ClientSecret string `yaml:"client_secret"`
	// ClientSecretFile names a file holding client_secret instead.
	ClientSecretFile string `yaml:"client_secret_file"`
	// PrivateKeyFile names a PEM file holding the RSA or ECDSA P-256
	// private key (PKCS#8, PKCS#1 or SEC 1) that signs private_key_jwt
	// assertions. Excludes a client secret.
	PrivateKeyFile string `yaml:"private_key_file"`
	// PrivateKeyID is the key's kid in the assertions' header.
	PrivateKeyID string `yaml:"private_key_id"`
	// Scopes are the scopes asked for.
	Scopes []string `yaml:"scopes" default:"those of the server's challenge or metadata"`
	// TokenEndpointAuthMethod is how agentd authenticates at the token
	// endpoint: client_secret_basic, client_secret_post, private_key_jwt
	// or none.
	TokenEndpointAuthMethod string `yaml:"token_endpoint_auth_method" default:"what the secret or key and the authorization server's metadata allow"`
	// RedirectURL replaces oauth.redirect_url for this server.
	RedirectURL string `yaml:"redirect_url" inherit:"oauth.redirect_url"`
}

// The grants of ServerOAuth.Grant.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
	GrantEnterpriseManaged = "enterprise_managed"
)

// ServerSecrets are a registered url server's secrets, as Secrets reads
// them.
type ServerSecrets struct {
	Authorization string
	ClientSecret  string
	PrivateKeyPEM string
}

// Secrets reads the secrets of the registered server name: the inline
// values, or the files that hold them. An error names the setting and
// the file, never what it holds.
func (s Server) Secrets(name string) (ServerSecrets, error) {
	var out ServerSecrets
	var err error
	if out.Authorization, err = readSecret(name, "authorization_file", s.Authorization, s.AuthorizationFile); err != nil {
		return ServerSecrets{}, err
	}
	if o := s.OAuth; o != nil {
		if out.ClientSecret, err = readSecret(name, "oauth.client_secret_file", o.ClientSecret, o.ClientSecretFile); err != nil {
			return ServerSecrets{}, err
		}
		if out.PrivateKeyPEM, err = readSecret(name, "oauth.private_key_file", "", o.PrivateKeyFile); err != nil {
			return ServerSecrets{}, err
		}
	}
	return out, nil
}

// readSecret is the secret of server name that inline gives, or, when
// set, the file that setting names, trimmed of white space.
func readSecret(name, setting, inline, file string) (string, error) {
	if file == "" {
		return inline, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("bridge.servers.%s.%s: %w", name, setting, err)
	}
	return strings.TrimSpace(string(data)), nil
}

// validate reports the problems of the registered server name through
// bad. Values are never echoed but the command's: headers, tokens,
// secrets and URLs may carry keys.
func (s Server) validate(name string, bad func(string, ...any)) {
	f := "bridge.servers." + name
	if s.Warm != nil && *s.Warm < 0 || s.MaxProcesses < 0 {
		bad("%s: warm and max_processes must not be negative", f)
	}
	switch {
	case s.Command == "" && s.URL == "":
		bad("%s: needs a command (a stdio server) or a url (a remote one)", f)
	case s.Command != "" && s.URL != "":
		bad("%s: command and url exclude each other; register a stdio server or a url server", f)
	case s.Command != "":
		s.validateCommand(f, bad)
	default:
		s.validateURL(f, bad)
	}
}

// validateCommand is validate for a stdio server, registered at f.
func (s Server) validateCommand(f string, bad func(string, ...any)) {
	if s.Command != filepath.Base(s.Command) && !filepath.IsAbs(s.Command) {
		bad("%s.command: must be a bare executable name or an absolute path, got %q", f, s.Command)
	}
	if s.Authorization != "" || s.AuthorizationFile != "" || len(s.Headers) > 0 || s.ReadTimeout != 0 || s.OAuth != nil {
		bad("%s: authorization, authorization_file, headers, read_timeout and oauth apply to url servers only", f)
	}
}

// validateURL is validate for a url server, registered at f: what a
// registration allows beside the declaration it stands for, then that
// declaration by the request's rules (mcpdecl), its secrets' files
// standing as set.
func (s Server) validateURL(f string, bad func(string, ...any)) {
	if !mcpdecl.HTTPURL(s.URL) {
		bad("%s.url: must be an absolute http or https URL", f)
	}
	var commandOnly []string
	for _, o := range []struct {
		set  bool
		name string
	}{{len(s.Args) > 0, "args"}, {len(s.Env) > 0, "env"}, {s.Shared != NotShared, "shared"}, {s.Warm != nil, "warm"}, {s.MaxProcesses != 0, "max_processes"}} {
		if o.set {
			commandOnly = append(commandOnly, o.name)
		}
	}
	if len(commandOnly) > 0 {
		bad("%s: %s apply to command servers only; a url server has no process", f, strings.Join(commandOnly, ", "))
	}
	if s.Authorization != "" && s.AuthorizationFile != "" {
		bad("%s: authorization and authorization_file exclude each other", f)
	}
	for k := range s.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			bad("%s.headers: header names must be non-empty tokens", f)
		}
	}
	if o := s.OAuth; o != nil {
		o.validateFiles(f+".oauth", bad)
		if s.AuthorizationFile != "" {
			bad("%s.authorization_file: may not be combined with oauth: agentd presents the tokens it obtains", f)
		}
	}
	var p mcpdecl.Problems
	decl := s.Declaration(s.declared())
	mcpdecl.CheckReadTimeout(&p, decl)
	mcpdecl.CheckOAuth(&p, decl, registeredTerms)
	for _, v := range p.Under(f) {
		bad("%s: %s", v.Field, v.Description)
	}
}

// registeredTerms name a registered server's credentials in its settings'
// words.
var registeredTerms = mcpdecl.Terms{
	Secret: "a client secret", SecretSetting: "client_secret or client_secret_file",
	Key: "private_key_file", CredentialsGrant: "the client_credentials grant", EnterpriseGrant: "the enterprise_managed grant", Files: true,
}

// validateFiles checks what the oauth block at f may set in a file, and
// what the client_credentials grant needs beside a client id: agentd
// itself is the client, with a secret or a key.
func (o *ServerOAuth) validateFiles(f string, bad func(string, ...any)) {
	if o.ClientSecret != "" && o.ClientSecretFile != "" {
		bad("%s: client_secret and client_secret_file exclude each other", f)
	}
	if o.PrivateKeyID != "" && o.PrivateKeyFile == "" {
		bad("%s.private_key_id: needs private_key_file", f)
	}
	if o.Grant == GrantClientCredentials && o.ClientSecret == "" && o.ClientSecretFile == "" && o.PrivateKeyFile == "" {
		bad("%s: the client_credentials grant needs client_secret, client_secret_file or private_key_file", f)
	}
}

// Declaration is the registered url server s in the request's form: the
// declaration a ref: to it stands for, with its secrets sec.
func (s Server) Declaration(sec ServerSecrets) *agentdv1.MCPServer {
	decl := &agentdv1.MCPServer{
		Transport:     &agentdv1.MCPServer_Url{Url: s.URL},
		Headers:       s.Headers,
		Authorization: sec.Authorization,
	}
	if s.ReadTimeout != 0 {
		decl.ReadTimeout = durationpb.New(s.ReadTimeout)
	}
	if o := s.OAuth; o != nil {
		decl.Oauth = &agentdv1.OAuthClient{
			Grant:                   grants[o.Grant],
			ClientId:                o.ClientID,
			ClientSecret:            sec.ClientSecret,
			PrivateKey:              sec.PrivateKeyPEM,
			PrivateKeyId:            o.PrivateKeyID,
			Scopes:                  o.Scopes,
			TokenEndpointAuthMethod: o.TokenEndpointAuthMethod,
			RedirectUrl:             o.RedirectURL,
		}
	}
	return decl
}

// grants are the request's grant of each grant setting.
var grants = map[string]agentdv1.GrantType{
	"":                     agentdv1.GrantType_GRANT_TYPE_AUTHORIZATION_CODE,
	GrantAuthorizationCode: agentdv1.GrantType_GRANT_TYPE_AUTHORIZATION_CODE,
	GrantClientCredentials: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS,
	GrantEnterpriseManaged: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED,
}

// declared are the secrets of s as its settings declare them, those its
// files hold standing as mcpdecl.FromFile, but for an authorization_file
// beside oauth, which validateURL names itself.
func (s Server) declared() ServerSecrets {
	sec := ServerSecrets{Authorization: s.Authorization}
	if s.AuthorizationFile != "" && s.OAuth == nil {
		sec.Authorization = mcpdecl.FromFile
	}
	if o := s.OAuth; o != nil {
		sec.ClientSecret = o.ClientSecret
		if o.ClientSecretFile != "" {
			sec.ClientSecret = mcpdecl.FromFile
		}
		if o.PrivateKeyFile != "" {
			sec.PrivateKeyPEM = mcpdecl.FromFile
		}
	}
	return sec
}

// Shared says which sessions one process of a registered server may serve
// at once. In YAML it is false, true or "global".
type Shared int

const (
	// NotShared (false): a process serves one session, then retires. A
	// warm spare that has served no session yet may go to any tenant.
	NotShared Shared = iota
	// SharedPerTenant (true): one process serves every session of one
	// tenant at once; each tenant has its own, so no state crosses from
	// one tenant to another.
	SharedPerTenant
	// SharedGlobal ("global"): one process serves every session of every
	// tenant at once.
	SharedGlobal
)

// String is the value as YAML spells it.
func (s Shared) String() string {
	switch s {
	case SharedPerTenant:
		return "true"
	case SharedGlobal:
		return "global"
	default:
		return "false"
	}
}

// UnmarshalYAML reads false, true or "global", as the enum of
// Server.Shared lists them.
func (s *Shared) UnmarshalYAML(n *yaml.Node) error {
	var b bool
	if n.Kind == yaml.ScalarNode && n.Decode(&b) == nil {
		*s = NotShared
		if b {
			*s = SharedPerTenant
		}
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Value == "global" {
		*s = SharedGlobal
		return nil
	}
	shown := what(n) // an enum's value is no secret: a scalar is quoted
	if n.Kind == yaml.ScalarNode {
		shown = strconv.Quote(n.Value)
	}
	return fmt.Errorf("%s is not one of %s", shown, enumText(fieldEnum[Server]("Shared")))
}
