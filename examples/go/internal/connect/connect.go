// Package connect is how the Go examples reach agentd, with the options
// every example takes:
//
//	--token     API key, sent as "authorization: Bearer" (env AGENTD_TOKEN)
//	--tls-ca    connect over TLS, trusting the CA certificates in this PEM file (env AGENTD_TLS_CA)
//	--tls-cert  connect over TLS, presenting this PEM client certificate (env AGENTD_TLS_CERT)
//	--tls-key   the PEM private key of --tls-cert (env AGENTD_TLS_KEY)
//
// and two positional arguments, agentd's address and the request file. The
// address is the argument, else AGENTD_ADDR, else 127.0.0.1:7070 (where
// `make run` starts agentd). With any TLS option the connection is TLS (no
// --tls-ca: the system's roots), plaintext otherwise; a flag overrides its
// environment variable.
package connect

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// defaultAddress is where `make run` starts agentd.
const defaultAddress = "127.0.0.1:7070"

// Options are how an example connects to agentd.
type Options struct {
	// Address is agentd's address, host:port.
	Address string
	// Token is the API key sent with every call; empty: none.
	Token string
	// TLSCA, TLSCert and TLSKey are PEM files: the CAs to trust, and the
	// client certificate with its key.
	TLSCA, TLSCert, TLSKey string
}

// Parse parses the command line (flag.CommandLine) into the options and
// returns them with the request file: the second positional argument, or
// request when there is none. An example without a request file passes "".
func Parse(request string) (Options, string) {
	var o Options
	// The environment is read after parsing, not given as the flags'
	// defaults: the usage prints defaults, and must not print the token.
	vars := []struct {
		flag, env, usage string
		v                *string
	}{
		{"token", "AGENTD_TOKEN", "API key, sent as \"authorization: Bearer\"", &o.Token},
		{"tls-ca", "AGENTD_TLS_CA", "connect over TLS, trusting the CA certificates in this PEM file", &o.TLSCA},
		{"tls-cert", "AGENTD_TLS_CERT", "connect over TLS, presenting this PEM client certificate", &o.TLSCert},
		{"tls-key", "AGENTD_TLS_KEY", "the PEM private key of --tls-cert", &o.TLSKey},
	}
	for _, v := range vars {
		flag.StringVar(v.v, v.flag, "", v.usage+" (default: env "+v.env+")")
	}
	flag.Usage = func() {
		args := "[address] [request.json]"
		if request == "" {
			args = "[address]"
		}
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] %s\n", os.Args[0], args)
		fmt.Fprintf(flag.CommandLine.Output(), "address: agentd's, host:port (default: env AGENTD_ADDR, else %s)\n", defaultAddress)
		flag.PrintDefaults()
	}
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, v := range vars {
		if !set[v.flag] {
			*v.v = os.Getenv(v.env)
		}
	}
	o.Address = cmp.Or(flag.Arg(0), os.Getenv("AGENTD_ADDR"), defaultAddress)
	if flag.NArg() > 1 {
		request = flag.Arg(1)
	}
	return o, request
}

// Dial returns a client connection to agentd: TLS when any TLS option is
// set, plaintext otherwise, sending the token, if any, with every call.
func (o Options) Dial() (*grpc.ClientConn, error) {
	creds, err := o.transport()
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(o.Token)))
	}
	return grpc.NewClient(o.Address, opts...)
}

func (o Options) transport() (credentials.TransportCredentials, error) {
	if o.TLSCA == "" && o.TLSCert == "" && o.TLSKey == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSCA != "" {
		pool, err := readCAs(o.TLSCA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if o.TLSCert != "" {
		cert, err := readKeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// Explain returns err, or, when err is a call's failure to connect
// because nothing listens at o.Address, an error that says so and how to
// put agentd there. grpc-go reports the refused dial only in the status
// message, so that is where it is looked for.
func (o Options) Explain(err error) error {
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "connection refused") {
		return err
	}
	return fmt.Errorf("agentd is not listening at %s: start it (make run) or set AGENTD_ADDR", o.Address)
}

// readCAs reads the CA certificates in the PEM file path.
func readCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// readKeyPair reads the client certificate and its key. The key's path
// is as secret as the key: errors name the flag.
func readKeyPair(certPath, keyPath string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return tls.Certificate{}, fmt.Errorf("--tls-key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert with --tls-key: %w", err)
	}
	return cert, nil
}

// bearer sends an API key as "authorization: Bearer <key>". It goes over
// plaintext too, for an agentd on loopback: use TLS anywhere else.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// ReadStart reads the request file Parse returned: a StartGeneration in
// the proto JSON mapping.
func ReadStart(file string) (*agentdv1.StartGeneration, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
		return nil, err
	}
	return start, nil
}

// Text is the text of a message's parts, joined.
func Text(m *agentdv1.Message) string {
	var text string
	for _, p := range m.GetParts() {
		text += p.GetText()
	}
	return text
}

// Start opens a Generate stream on conn and sends start.
func Start(ctx context.Context, conn grpc.ClientConnInterface, start *agentdv1.StartGeneration) (agentdv1.AgentService_GenerateClient, error) {
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		return nil, err
	}
	return stream, nil
}

// Each calls handle with each of stream's events, until the stream ends
// (nil), or Recv or handle fails.
func Each(stream agentdv1.AgentService_GenerateClient, handle func(*agentdv1.GenerateResponse) error) error {
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := handle(ev); err != nil {
			return err
		}
	}
}
