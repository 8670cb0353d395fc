package app

import (
	"fmt"
	"maps"
	"slices"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcpauth"
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
