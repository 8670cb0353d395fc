// Command shim is the client the MCP conformance suite runs for each of its
// client scenarios: `shim [-direct] <server URL>`, with the scenario in
// MCP_CONFORMANCE_SCENARIO. It does what conformance.Scripts says the scenario
// asks, through agentd's public Generate API: a script-provider generation on
// the agentd at AGENTD_CONFORMANCE_ADDR, or on one it starts in-process when
// that is unset. In the auth scenarios the server is declared with an oauth
// block built from the scenario and MCP_CONFORMANCE_CONTEXT, and the shim acts
// as the person: it follows each authorization request to the authorization
// server's redirect and answers with it, and accepts each request for input.
// With -direct it does the same as a plain go-sdk client instead, for
// comparison: the go-sdk's OAuth handlers authorize it, and it accepts every
// elicitation. It exits 1 when the generation (or the direct client) fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentd/agentd/internal/conformance"
	"github.com/agentd/agentd/internal/version"
)

func main() {
	direct := flag.Bool("direct", false, "be a plain go-sdk client instead of driving agentd")
	timeout := flag.Duration("timeout", 25*time.Second, "give up after this long (the suite allows 30s)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: shim [-direct] <server URL>  (scenario in "+conformance.ScenarioEnv+")")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err := run(ctx, *direct, os.Getenv(conformance.ScenarioEnv), flag.Arg(0))
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, direct bool, scenario, url string) error {
	if direct {
		return runDirect(ctx, scenario, url)
	}
	addr, stop, err := agentdAddr()
	if err != nil {
		return err
	}
	defer stop()
	c, err := conformance.ParseContext(os.Getenv(conformance.ContextEnv))
	if err != nil {
		return err
	}
	out, err := conformance.Generate(ctx, addr, scenario, url, c)
	printOutcome(out)
	if err != nil {
		return fmt.Errorf("generation: %w", err)
	}
	fmt.Printf("completed: %q\n", out.Final)
	return nil
}

// agentdAddr is the address of the agentd the run serves (AddrEnv), or,
// run alone, of one served here until stop.
func agentdAddr() (addr string, stop func(), err error) {
	if addr := os.Getenv(conformance.AddrEnv); addr != "" {
		return addr, func() {}, nil
	}
	d, err := conformance.StartAgentd(os.Stderr)
	if err != nil {
		return "", nil, err
	}
	return d.Addr, func() { _ = d.Stop() }, nil
}

// printOutcome prints the requests the shim answered and the tool calls'
// outcomes, for the suite's log.
func printOutcome(out conformance.Outcome) {
	for _, r := range out.Authorizations {
		fmt.Printf("authorization request %s (%s, scopes %q): answered with the redirect\n", r.GetId(), r.GetReason(), r.GetScopes())
	}
	for _, r := range out.Inputs {
		fmt.Printf("input request %s (%s): accepted\n", r.GetId(), r.GetMode())
	}
	for _, c := range out.Calls {
		fmt.Printf("tool call %s: error=%v output=%q\n", c.GetToolName(), c.GetIsError(), c.GetOutput())
	}
}

// runDirect is the plain go-sdk client: connect (authorizing with the
// go-sdk's OAuth handlers), list tools, call the scenario's tool; an
// elicitation is accepted with empty content.
func runDirect(ctx context.Context, scenario, url string) error {
	s, ok := conformance.Scripts[scenario]
	if !ok {
		return fmt.Errorf("no script for scenario %q", scenario)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd-conformance-direct", Version: version.Get().Version}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	oauth, err := oauthHandler(scenario)
	if err != nil {
		return err
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, OAuthHandler: oauth}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	return listAndCall(ctx, cs, s)
}

// listAndCall lists the server's tools and calls the script's tool, if
// it names one.
func listAndCall(ctx context.Context, cs *mcp.ClientSession, s conformance.Script) error {
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return err
	}
	if s.Tool == "" {
		return nil
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: s.Tool, Arguments: s.Args})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("the tool call failed")
	}
	return nil
}

// The direct client's OAuth identity, as the suite's example client has
// it: its client ID metadata document and its redirect URL.
const (
	cimdURL     = conformance.CIMDURL
	redirectURL = "http://localhost:3000/callback"
)

// oauthHandler is the go-sdk's authorization-code handler (client ID
// metadata document, else the context's pre-registered client, else
// dynamic registration) or, for the client-credentials scenarios, its
// client-credentials handler with the context's secret. The person's
// step is the suite's test authorization server, which approves at once:
// its redirect carries the code.
func oauthHandler(scenario string) (auth.OAuthHandler, error) {
	c, err := conformance.ParseContext(os.Getenv(conformance.ContextEnv))
	if err != nil {
		return nil, err
	}
	pre := preregistered(c)
	if scenario == "auth/client-credentials-basic" && pre != nil {
		return extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{Credentials: pre})
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirectURL,
		AuthorizationCodeFetcher: followAuthorization,
		PreregisteredClient:      pre,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "agentd-conformance-direct", RedirectURIs: []string{redirectURL},
		}},
	}
	if pre == nil {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: cimdURL}
	}
	return auth.NewAuthorizationCodeHandler(cfg)
}

// preregistered is the context's pre-registered client, with its secret
// if it has one; nil when there is none.
func preregistered(c conformance.Context) *oauthex.ClientCredentials {
	if c.ClientID == "" {
		return nil
	}
	pre := &oauthex.ClientCredentials{ClientID: c.ClientID}
	if c.ClientSecret != "" {
		pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: c.ClientSecret}
	}
	return pre
}

// followAuthorization visits the authorization URL as the person's
// browser would and reads the code, state and issuer from the redirect.
func followAuthorization(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	redirect, err := conformance.Authorize(ctx, args.URL)
	if err != nil {
		return nil, err
	}
	loc, err := url.Parse(redirect)
	if err != nil {
		return nil, err
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
