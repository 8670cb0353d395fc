package main

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// waitingAgent is a script agent whose model calls its function tool
// "wait" and, once answered, says so: with its client silent, its
// generation waits for the answer, under its replica's lease.
func waitingAgent() (*agentdv1.Agent, error) {
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "wait"}}},
		map[string]any{"text": "answered"},
	}}})
	if err != nil {
		return nil, err
	}
	return &agentdv1.Agent{Provider: "script", Tools: []*agentdv1.FunctionTool{{Name: "wait"}}, ProviderOptions: opts}, nil
}

// startWaiting starts a waiting generation on the replica at addr, and
// returns its id once the generation asks for the function's result,
// with done, which closes the stream (after the replica's death).
func startWaiting(ctx context.Context, addr string) (id string, done func(), err error) {
	agent, err := waitingAgent()
	if err != nil {
		return "", nil, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	done = func() { cancel(); _ = conn.Close() }
	if id, err = waitFor(ctx, conn, agent); err != nil {
		done()
		return "", nil, err
	}
	return id, done, nil
}

// waitFor starts agent on conn and reads its stream until the function
// call: the generation waits now.
func waitFor(ctx context.Context, conn *grpc.ClientConn, agent *agentdv1.Agent) (string, error) {
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return "", err
	}
	start := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent:    agent,
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "wait"}}}}},
	}}}
	if err := stream.Send(start); err != nil {
		return "", err
	}
	var id string
	for {
		ev, err := stream.Recv()
		if err != nil {
			return "", fmt.Errorf("the generation's stream ended before its function call: %w", err)
		}
		if s := ev.GetStarted(); s != nil {
			id = s.GetGenerationId()
		}
		if ev.GetFunctionCall() != nil {
			if id == "" {
				return "", errors.New("a function call before the started event")
			}
			return id, nil
		}
	}
}
