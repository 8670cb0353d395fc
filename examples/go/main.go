// Command go-example runs the demo generation against a running agentd and
// prints its events:
//
//	go run ./examples/go [flags] [address] [request.json]
//
// With --token (or AGENTD_TOKEN) it sends that API key ("authorization:
// Bearer"). With --tls-ca, --tls-cert or --tls-key (or AGENTD_TLS_CA,
// AGENTD_TLS_CERT, AGENTD_TLS_KEY) it connects over TLS: trusting the CA
// certificates in --tls-ca (none: the system's roots), and presenting
// --tls-cert and --tls-key as its client certificate to an agentd that
// requires one.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// options are how the example connects.
type options struct {
	token, tlsCA, tlsCert, tlsKey string
}

func main() {
	var o options
	flag.StringVar(&o.token, "token", os.Getenv("AGENTD_TOKEN"), "API key, sent as \"authorization: Bearer\" (env AGENTD_TOKEN)")
	flag.StringVar(&o.tlsCA, "tls-ca", os.Getenv("AGENTD_TLS_CA"), "connect over TLS, trusting the CA certificates in this PEM file (env AGENTD_TLS_CA)")
	flag.StringVar(&o.tlsCert, "tls-cert", os.Getenv("AGENTD_TLS_CERT"), "connect over TLS, presenting this PEM client certificate (env AGENTD_TLS_CERT)")
	flag.StringVar(&o.tlsKey, "tls-key", os.Getenv("AGENTD_TLS_KEY"), "the PEM private key of --tls-cert (env AGENTD_TLS_KEY)")
	flag.Parse()
	addr, file := "127.0.0.1:7070", "examples/demo-start.json"
	if flag.NArg() > 0 {
		addr = flag.Arg(0)
	}
	if flag.NArg() > 1 {
		file = flag.Arg(1)
	}
	if err := run(addr, file, o); err != nil {
		fmt.Fprintln(os.Stderr, "go example:", err)
		os.Exit(1)
	}
}

// transport is TLS when any TLS option is set, plaintext otherwise.
func transport(o options) (credentials.TransportCredentials, error) {
	if o.tlsCA == "" && o.tlsCert == "" && o.tlsKey == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsCA != "" {
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in it", o.tlsCA)
		}
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

func run(addr, file string, o options) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
		return err
	}
	creds, err := transport(o)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+o.token)
	}
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		return err
	}
	var final string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_Started:
			fmt.Println("started", k.Started.GetGenerationId())
		case *agentdv1.GenerateResponse_TextDelta:
			fmt.Printf("text_delta %q\n", k.TextDelta.GetText())
		case *agentdv1.GenerateResponse_ToolCallStarted:
			fmt.Println("tool_call_started", k.ToolCallStarted.GetToolName(), k.ToolCallStarted.GetArguments())
		case *agentdv1.GenerateResponse_ToolCallFinished:
			fmt.Println("tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
		case *agentdv1.GenerateResponse_Usage:
			fmt.Println("usage", k.Usage.GetInputTokens(), k.Usage.GetOutputTokens())
		case *agentdv1.GenerateResponse_Completed:
			for _, p := range k.Completed.GetMessage().GetParts() {
				final += p.GetText()
			}
			fmt.Println("completed", final)
		}
	}
	if !strings.Contains(final, "hello from agentd") {
		return fmt.Errorf("the generation did not complete with the demo answer (got %q)", final)
	}
	return nil
}
