package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/tlsconf"
)

// defaultAddr is where the client commands find agentd when neither
// --addr nor AGENTD_ADDR says: agentd serve's default listen address.
const defaultAddr = "127.0.0.1:7070"

// clientFlags are the flags of every command that calls agentd: where it
// listens, the credential, TLS, and how to print.
type clientFlags struct {
	addr, token                           string
	tlsCA, tlsCert, tlsKey, tlsServerName string
	asJSON                                bool
	// addrGiven: --addr was on the command line, so a command printed
	// for the person to type next must repeat it.
	addrGiven bool
}

// clientUsage ends the usage of every client command.
const clientUsage = `
--addr defaults to AGENTD_ADDR, else ` + defaultAddr + `; --token, --tls-ca,
--tls-cert and --tls-key default to AGENTD_TOKEN, AGENTD_TLS_CA,
AGENTD_TLS_CERT and AGENTD_TLS_KEY. A flag given, even empty, overrides
its variable.
`

func (c *clientFlags) register(fs *flag.FlagSet) {
	// None defaulted from the environment in the flag set: the flag
	// package prints a default in the usage, and the token and the key's
	// path must never be printed. A flag not given takes its variable
	// after parsing.
	fs.StringVar(&c.addr, "addr", "", "where agentd listens, `host:port` (default: env AGENTD_ADDR, else "+defaultAddr+")")
	fs.StringVar(&c.token, "token", "", "API key or token sent as \"authorization: Bearer\" (default: env AGENTD_TOKEN); none: no credential")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "dial with TLS, trusting the CA certificates in this PEM `file` (default: env AGENTD_TLS_CA; TLS with none: the system's roots)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "dial with TLS, presenting this PEM client certificate `file` (with --tls-key) to a server that requires one (default: env AGENTD_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the PEM private key `file` of --tls-cert (default: env AGENTD_TLS_KEY)")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "dial with TLS, checking the server's certificate for this `name` (default: the host of --addr)")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object (the proto JSON mapping) per line")
}

// fromEnv gives the flags the command line did not set their variables.
func (c *clientFlags) fromEnv(fs *flag.FlagSet, getenv func(string) string) {
	c.addrGiven = flagSet(fs, "addr")
	for _, d := range []struct {
		flag, env string
		v         *string
	}{{"addr", "AGENTD_ADDR", &c.addr}, {"token", "AGENTD_TOKEN", &c.token}, {"tls-ca", "AGENTD_TLS_CA", &c.tlsCA}, {"tls-cert", "AGENTD_TLS_CERT", &c.tlsCert}, {"tls-key", "AGENTD_TLS_KEY", &c.tlsKey}} {
		if !flagSet(fs, d.flag) {
			*d.v = getenv(d.env)
		}
	}
	if c.addr == "" {
		c.addr = defaultAddr
	}
}

// call connects to agentd and runs do with a client and a context that
// carries the credential; a refused connection's error says what to do.
func (c *clientFlags) call(ctx context.Context, do func(context.Context, agentdv1.AgentServiceClient) error) error {
	creds, err := c.credentials()
	if err != nil {
		return err
	}
	conn, err := grpcserver.Dial(c.addr, grpcserver.Telemetry{}, creds)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx) // stops the reading of the person's answers
	defer cancel()
	if c.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
	}
	return c.explain(do(ctx, agentdv1.NewAgentServiceClient(conn)))
}

// credentials are TLS's when any TLS flag is given; nil dials in
// plaintext.
func (c *clientFlags) credentials() (credentials.TransportCredentials, error) {
	if c.tlsCA == "" && c.tlsCert == "" && c.tlsKey == "" && c.tlsServerName == "" {
		return nil, nil
	}
	cfg, err := tlsconf.Client(c.tlsCA, c.tlsCert, c.tlsKey, c.tlsServerName)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// explain turns a refused connection into what the person can do about
// it; other errors pass as they are.
func (c *clientFlags) explain(err error) error {
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "connection refused") {
		return err
	}
	return fmt.Errorf("cannot reach agentd at %s: connection refused. Is it running? Start it with \"make run\" (or \"agentd serve\"), "+
		"or set AGENTD_ADDR (or --addr) to the address it listens on", c.addr)
}

// printing is where a command's output goes: events, records and the
// commands to type next on stdout, or, with --json, the JSON lines on
// stdout and the rest, for people, on stderr.
func (c *clientFlags) printing(stdout, stderr io.Writer) *printer {
	p := &printer{w: stdout, notes: stdout, asJSON: c.asJSON, next: c.typed()}
	if c.asJSON {
		p.notes = stderr
	}
	return p
}

// typed is how the commands printed for the person to type next start:
// this program, as they invoked it, and the --addr they gave.
func (c *clientFlags) typed() typed {
	t := typed{prog: os.Args[0]}
	if c.addrGiven {
		t.addr = c.addr
	}
	return t
}

// newFlagSet is a command's flag set, whose usage is the command's text
// then its flags.
func newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		if hasFlags(fs) {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseFlags parses args, flags and positional arguments mixed (agentd
// get ID --json as well as agentd get --json ID), and returns the
// positional ones. -h prints the usage on stdout and returns flag.ErrHelp;
// a bad flag's error says how to get the usage.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%w (\"%s -h\" shows the flags)", err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if end := len(args) - len(rest); end > 0 && args[end-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseWithID parses the args of a command that takes one id, of a
// generation or a thread as what says, which it returns, and gives the
// client flags not set their variables.
func (c *clientFlags) parseWithID(fs *flag.FlagSet, what string, args []string, getenv func(string) string, stdout io.Writer) (string, error) {
	positional, err := parseFlags(fs, args, stdout)
	if err != nil {
		return "", err
	}
	if len(positional) != 1 || positional[0] == "" {
		return "", fmt.Errorf("want one %s id (\"%s -h\" shows how)", what, fs.Name())
	}
	c.fromEnv(fs, getenv)
	return positional[0], nil
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
