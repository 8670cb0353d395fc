package app

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/oauthclient"
)

// registeredURLServers are the url servers of bridge.servers as the
// declarations a ref: to one stands for (server.Options.Registered), with
// their secrets read from their files at start. What is wrong with a
// secret is said by its setting, never by what it holds.
func registeredURLServers(servers map[string]config.Server) (map[string]*agentdv1.MCPServer, error) {
	out := make(map[string]*agentdv1.MCPServer)
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		reg := servers[name]
		if reg.URL == "" {
			continue
		}
		sec, err := reg.Secrets(name)
		if err != nil {
			return nil, err
		}
		f := "bridge.servers." + name
		if reg.AuthorizationFile != "" && sec.Authorization == "" {
			return nil, fmt.Errorf("%s.authorization_file: the file is empty", f)
		}
		if o := reg.OAuth; o != nil {
			if o.ClientSecretFile != "" && sec.ClientSecret == "" {
				return nil, fmt.Errorf("%s.oauth.client_secret_file: the file is empty", f)
			}
			if o.PrivateKeyFile != "" {
				if _, err := mcpauth.ParsePrivateKey(sec.PrivateKeyPEM); err != nil {
					return nil, fmt.Errorf("%s.oauth.private_key_file: must hold an RSA or ECDSA P-256 private key in PEM (PKCS#8, PKCS#1 or SEC 1)", f)
				}
			}
		}
		decl := reg.Declaration(sec)
		out[name] = decl
	}
	return out, nil
}

// identityProvider is oauth.identity_provider with its client's secret
// read from its file; the ID token file is read at each grant instead.
func identityProvider(c config.IdentityProvider) (oauthclient.IdentityProvider, error) {
	p := oauthclient.IdentityProvider{Issuer: c.Issuer, TokenEndpoint: c.TokenEndpoint, ClientID: c.ClientID, IDTokenFile: c.IDTokenFile}
	if c.ClientSecretFile != "" {
		b, err := os.ReadFile(c.ClientSecretFile)
		if err != nil {
			return p, fmt.Errorf("oauth.identity_provider.client_secret_file: %w", err)
		}
		p.ClientSecret = strings.TrimSpace(string(b))
	}
	return p, nil
}
