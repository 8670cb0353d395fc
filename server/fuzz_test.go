package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpdecl"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/anthropic"
	"github.com/agentd/agentd/providers/registry"
	"github.com/agentd/agentd/providers/scripted"
)

// userText is the seeds' user message.
const userText = `{"role":"ROLE_USER","parts":[{"text":"What is in the repository?"}]}`

// validateSeeds are StartGeneration requests, valid and invalid, as
// clients write them.
var validateSeeds = []string{
	`{"agent":{"provider":"mock"},"messages":[` + userText + `]}`,
	`{}`,
	`{"messages":[` + userText + `]}`,
	`{"agent":{"provider":"nosuch","model":"m"}}`,
	`{"agent":{"provider":"anthropic","model":"claude-sonnet-4-5","instructions":"Be brief.","mcps":[
		{"name":"docs","url":"https://mcp.example.com/mcp","authorization":"sk-live-SECRET"},
		{"url":"https://api.example.org/v1/mcp?api_key=QUERY-SECRET","headers":{"X-Api-Key":"HEADER-SECRET"},"requireApproval":{"never":{"toolNames":["search"]}}},
		{"name":"local","url":"http://127.0.0.1:8080/mcp","readTimeout":"5s","maxReconnectionWait":"60s"},
		{"name":"basic","url":"https://mcp.example.net/mcp","authorization":"Basic dXNlcjpwYXNz"},
		{"name":"userinfo","url":"https://user:PASSWORD-SECRET@mcp.example.net/mcp"},
		{"name":"meta","url":"https://169.254.169.254/latest"},
		{"name":"v6","url":"https://[::1]:9000/mcp"},
		{"name":"sub","url":"https://api.localhost/mcp"}]},
		"messages":[` + userText + `],"answerTimeout":"30s"}`,
	`{"agent":{"provider":"script","providerOptions":{"script":{"turns":[
		{"tool_calls":[{"name":"read_file","arguments":{"path":"README.md"}}]},{"text":"Done: {{tool_outputs}}"}]}},
		"mcps":[
		{"name":"files","command":"/usr/bin/files-mcp","args":["--root","/srv"],"env":{"FILES_TOKEN":"ENV-SECRET"},"unsetEnv":["DEBUG"],
		 "allowedTools":["read_file","list_dir"],"requireApproval":{"mode":"APPROVAL_MODE_ALWAYS"}},
		{"ref":"demo","requireApproval":{"always":{"toolNames":["delete"]},"never":{"toolNames":["read"]}}}],
		"requiresApproval":["read_file"],"maxToolTurns":5},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"script","providerOptions":{"script":{"turns":[]}}},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"script","providerOptions":{"script":{"turns":[{"error":{"kind":"nope","message":"x"},"text":"y"},{"tool_calls":[{"name":"","arguments":"[1]"}]}]}}},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"openai-responses","model":"gpt-4.1","mcps":[
		{"name":"mail","url":"mcp://gmail","authorization":"ya29.TOKEN"},
		{"name":"drive","url":"mcp://googledrive"},
		{"url":"mcp://nosuchconnector","authorization":"Bearer x"},
		{"name":"remote","url":"https://mcp.example.com/mcp","headers":{"X-Key":"HEADER-SECRET"}}],
		"providerOptions":{"include":["reasoning.encrypted_content"],"tools":[{"type":"web_search"}],"model":"gpt-5"}},
		"messages":[` + userText + `]}`,
	`{"agent":{"provider":"anthropic","model":"claude-opus-4-1","mcpStrategy":"MCP_STRATEGY_SERVER","mcps":[
		{"name":"gated","url":"https://mcp.example.com/a","requireApproval":{"mode":"APPROVAL_MODE_ALWAYS"}},
		{"name":"plain","url":"http://mcp.example.com/b"},
		{"name":"cmd","command":"npx","args":["-y","@modelcontextprotocol/server-everything"]},
		{"name":"allowed","url":"https://mcp.example.com/c","allowedTools":["echo","add"]},
		{"name":"open","url":"https://mcp.example.com/d"}],
		"requiresApproval":["echo"]},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"anthropic","model":"claude-haiku-4-5","mcpStrategy":"MCP_STRATEGY_CLIENT","mcps":[{"name":"a","url":"https://mcp.example.com/a"}]},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"openai","model":"gpt-4o","tools":[
		{"name":"get_weather","description":"Weather by city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
		{"name":"get_weather"},{"name":"bad name!"},{"name":"arr","parameters":{"type":"array"}}],
		"requiresApproval":["get_weather",""],"toolNameConflict":"TOOL_NAME_CONFLICT_PREFIX","mcpCache":false},
		"messages":[` + userText + `,
		{"role":"ROLE_ASSISTANT","parts":[{"text":"Checking."},{"toolCall":{"id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"ROLE_TOOL","parts":[{"toolResult":{"toolCallId":"call_1","name":"get_weather","output":"18C"}}]},
		{"role":"ROLE_USER","parts":[{"media":{"mimeType":"image/png","uri":"https://example.com/a.png"}}]}]}`,
	`{"agent":{"provider":"gemini","model":"gemini-2.5-pro","providerOptions":{"contents":[]}},"messages":[
		{"parts":[{"text":"no role"}]},{"role":"ROLE_USER"},{"role":"ROLE_USER","parts":[{"toolCall":{"name":"x"}},{}]},
		{"role":"ROLE_ASSISTANT","parts":[{"toolResult":{}}]},{"role":9,"parts":[{"reasoning":{"text":"hm"}}]}],"answerTimeout":"-1s"}`,
	`{"agent":{"provider":"ollama","model":"llama3.2","maxToolTurns":0,"providerOptions":{"model":"other","stream":false,"options":{"temperature":0.2}},"mcps":[
		{"name":"slow","command":"slow-mcp","readTimeout":"7200s","env":{"":"x","A=B":"y"},"unsetEnv":["A=B"]},
		{"name":"slow","ref":"demo","args":["--x"],"authorization":"t","maxReconnectionWait":"1s"},{}]},
		"messages":[` + userText + `],"answerTimeout":"7201s"}`,
	`{"agent":{"provider":"router","model":"claude-sonnet-4-5"},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"router","model":"nosuch/model-x"},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"router","model":"gemini/gemini-2.5-flash","maxToolTurns":1000},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"deepseek","model":"deepseek-chat","mcpStrategy":7,"toolNameConflict":9,"mcps":[
		{"name":"m","url":"https://mcp.example.com","requireApproval":{"mode":"APPROVAL_MODE_NEVER","always":{"toolNames":["a"]}}},
		{"name":"n","url":"ftp://mcp.example.com/x","requireApproval":{"mode":5,"always":{}}},
		{"url":"not a url","args":["x"],"env":{"K":"V"},"unsetEnv":["K"],"maxReconnectionWait":"0s","allowedTools":[""]}]},
		"messages":[` + userText + `]}`,
	`{"agent":{"provider":"anthropic","model":"claude-sonnet-4-5","mcps":[{"name":"up","url":"HTTPS://MCP.Example.COM/mcp"},{"name":"mixed","url":"Http://localhost/mcp"}]},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"azure"},"messages":[` + userText + `],"answerTimeout":"0s"}`,
	`{"agent":{"provider":"openrouter","model":"anthropic/claude-sonnet-4.5","maxToolTurns":1001},"messages":[` + userText + `]}`,
	`{"agent":{"provider":"requesty","model":"openai/gpt-4o","mcps":[{"url":"http://localhost:3000/mcp"},{"url":"https://mcp.example.com/x"},{"url":"https://mcp.example.com/y"}]},"messages":[` + userText + `]}`,
}

// FuzzValidate proves that request validation (newGeneration, up to the
// plan) never panics, judges a request alike whatever the case of its URL
// schemes, and ends one of two ways. Refused: as InvalidArgument with one
// google.rpc.BadRequest field violation per problem, each naming a field
// under "start", the same when asked twice, and never quoting a secret
// (authorization, header and env values, URL paths, queries and
// passwords).
// Accepted: as a plan that keeps the README's promises: names unique,
// limits within bounds, command and ref servers in the bridge, a server
// at the provider only if the provider can serve it and no approval could
// gate its tools, SERVER strategy all at the provider, CLIENT none, AUTO
// every server it may, and no more than the provider takes.
func FuzzValidate(f *testing.F) {
	for _, seed := range validateSeeds {
		start := &agentdv1.StartGeneration{}
		if err := protojson.Unmarshal([]byte(seed), start); err != nil {
			f.Fatalf("seed %s: %v", seed, err)
		}
		f.Add(marshal(f, start))
	}
	many := &agentdv1.Agent{Provider: "anthropic", Model: "claude-sonnet-4-5"}
	for i := range anthropic.MaxServers + 1 {
		many.Mcps = append(many.Mcps, &agentdv1.MCPServer{Name: fmt.Sprint("s", i), Transport: &agentdv1.MCPServer_Url{Url: fmt.Sprintf("https://mcp%d.example.com/mcp", i)}})
	}
	f.Add(marshal(f, &agentdv1.StartGeneration{Agent: many, Messages: []*agentdv1.Message{userMessage("hi")}}))

	s := New(Options{Providers: allProviders(f), Config: config.Default().Generation})
	f.Fuzz(func(t *testing.T, data []byte) {
		start := &agentdv1.StartGeneration{}
		if proto.Unmarshal(data, start) != nil {
			return
		}
		// A secret must not show, so each carries a marker; unless the
		// request already holds the marker where it may show.
		secretsMarked := !bytes.Contains(bytes.ToLower(data), []byte(secretMark)) && markSecrets(start)
		g, err := s.newGeneration(t.Context(), start)
		if lower := lowerSchemes(start); lower != nil {
			checkAlike(t, g, err, lower, s)
		}
		if err != nil {
			checkRefusal(t, err, secretsMarked)
			if _, again := s.newGeneration(t.Context(), start); again == nil || again.Error() != err.Error() {
				t.Fatalf("validating the same request twice: %v, then %v", err, again)
			}
			return
		}
		checkPlan(t, s, start, g.plan)
	})
}

// lowerSchemes returns a copy of start with its MCP servers' URL schemes
// in lower case, or nil if none has a capital.
func lowerSchemes(start *agentdv1.StartGeneration) *agentdv1.StartGeneration {
	lower := proto.Clone(start).(*agentdv1.StartGeneration)
	changed := false
	for _, m := range lower.GetAgent().GetMcps() {
		if u, ok := m.Transport.(*agentdv1.MCPServer_Url); ok {
			if scheme, rest, found := strings.Cut(u.Url, ":"); found && scheme != strings.ToLower(scheme) {
				u.Url = strings.ToLower(scheme) + ":" + rest
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	return lower
}

// checkAlike checks that a request whose URL schemes were lowercased is
// judged like the original (g, err): URL schemes are case-insensitive
// (RFC 3986), and url.Parse lowercases them.
func checkAlike(t *testing.T, g *generation, err error, lower *agentdv1.StartGeneration, s *Service) {
	t.Helper()
	lg, lerr := s.newGeneration(t.Context(), lower)
	switch {
	case (err == nil) != (lerr == nil):
		t.Fatalf("with the URL schemes in lower case, a request is judged otherwise: %v, then %v", err, lerr)
	case err != nil:
		return
	}
	all := agentdv1.Placement_PLACEMENT_UNSPECIFIED
	if want, got := g.plan.placements(all), lg.plan.placements(all); !slices.EqualFunc(want, got, func(a, b *agentdv1.ServerPlacement) bool { return proto.Equal(a, b) }) {
		t.Fatalf("with the URL schemes in lower case, servers run elsewhere: %v, then %v", want, got)
	}
}

// secretMark is appended to every secret of a fuzzed request.
const secretMark = "qzsecretmarkxq"

// markSecrets appends secretMark to every secret value of start's MCP
// servers; it reports whether there was one.
func markSecrets(start *agentdv1.StartGeneration) bool {
	marked := false
	for _, m := range start.GetAgent().GetMcps() {
		if m.Authorization != "" {
			m.Authorization += secretMark
			marked = true
		}
		for k, v := range m.Headers {
			m.Headers[k] = v + secretMark
			marked = true
		}
		for k, v := range m.Env {
			m.Env[k] = v + secretMark
			marked = true
		}
		if u, ok := m.Transport.(*agentdv1.MCPServer_Url); ok {
			if withMark := markURL(u.Url); withMark != u.Url {
				u.Url = withMark
				marked = true
			}
		}
	}
	return marked
}

// markURL appends secretMark to the query or path that raw ends with,
// and to the password of its user information, where that leaves the
// host as it was.
func markURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || strings.Contains(raw, "#") {
		return raw
	}
	marked := raw
	if _, hasPassword := u.User.Password(); hasPassword {
		scheme, rest, _ := strings.Cut(marked, "//")
		userinfo, hostAndAfter, _ := strings.Cut(rest, "@")
		marked = scheme + "//" + userinfo + secretMark + "@" + hostAndAfter
	}
	if u.RawQuery != "" || u.ForceQuery || len(u.Path) > 1 {
		marked += secretMark
	}
	if m, err := url.Parse(marked); err != nil || m.Host != u.Host {
		return raw
	}
	return marked
}

// checkRefusal checks that err refuses a request as the README says.
func checkRefusal(t *testing.T, err error, secretsMarked bool) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) || len(fe.Violations) == 0 {
		t.Fatalf("a refused request: %v (kind %v), want violations", err, fault.KindOf(err))
	}
	// X-D9: a request refused only by policy (env variables the bridge
	// does not allow) is PermissionDenied; anything else invalid makes it
	// InvalidArgument. Either way every problem is listed.
	want, wantCode := fault.Invalid, codes.InvalidArgument
	if !slices.ContainsFunc(fe.Violations, func(v fault.Violation) bool { return !strings.Contains(v.Description, "bridge.allowed_env") }) {
		want, wantCode = fault.Permission, codes.PermissionDenied
	}
	if fe.Kind != want {
		t.Fatalf("a refused request: %v (kind %v), want %v", err, fe.Kind, want)
	}
	st := fault.Status(err)
	if st.Code() != wantCode {
		t.Fatalf("a refused request has the status %v, want %v", st.Code(), wantCode)
	}
	var fields []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			fields = append(fields, br.GetFieldViolations()...)
		}
	}
	if len(fields) != len(fe.Violations) {
		t.Fatalf("the status has %d field violations, the error %d: %v", len(fields), len(fe.Violations), st.Message())
	}
	texts := []string{st.Message()}
	for _, v := range fields {
		if !strings.HasPrefix(v.GetField(), "start.") || v.GetDescription() == "" {
			t.Fatalf("field violation %q: %q, want a field under start and a description", v.GetField(), v.GetDescription())
		}
		texts = append(texts, v.GetField(), v.GetDescription())
	}
	if !secretsMarked {
		return
	}
	for _, text := range texts {
		if strings.Contains(strings.ToLower(text), secretMark) {
			t.Fatalf("a refusal quotes a secret: %q", text)
		}
	}
}

// checkPlan checks an accepted request's plan against the README.
func checkPlan(t *testing.T, s *Service, start *agentdv1.StartGeneration, p *plan) {
	t.Helper()
	agent := start.GetAgent()
	if p.provider == nil || p.provider.Name() != agent.GetProvider() {
		t.Fatalf("the plan's provider is %v, the request names %q", p.provider, agent.GetProvider())
	}
	if p.limits.values[limitToolTurns] < 1 || p.limits.values[limitToolTurns] > config.MaxToolTurnsLimit {
		t.Fatalf("max tool turns %d, want 1..%d", p.limits.values[limitToolTurns], config.MaxToolTurnsLimit)
	}
	if p.answerTimeout < 0 || p.answerTimeout > s.cfg.MaxAnswerTimeout {
		t.Fatalf("answer timeout %v, want 0..%v", p.answerTimeout, s.cfg.MaxAnswerTimeout)
	}
	if len(p.servers) != len(agent.GetMcps()) {
		t.Fatalf("%d servers planned, %d declared", len(p.servers), len(agent.GetMcps()))
	}
	agentTools := make(map[string]int)
	for i, tool := range agent.GetTools() {
		agentTools[tool.GetName()] = i
	}
	caps := p.provider.Capabilities()
	strategy := agent.GetMcpStrategy()
	names := make(map[string]bool)
	atProvider := 0
	for _, sp := range p.servers {
		decl := sp.decl
		if sp.name == "" || names[sp.name] || decl.GetName() != "" && sp.name != decl.GetName() {
			t.Fatalf("server %s is named %q (declared %q); names so far %v", sp.field, sp.name, decl.GetName(), names)
		}
		names[sp.name] = true
		if sp.readTimeout <= 0 || sp.readTimeout > mcpdecl.MaxReadTimeout {
			t.Fatalf("server %q: read timeout %v", sp.name, sp.readTimeout)
		}
		why := ""
		servable := false
		switch sp.transport {
		case agentdv1.Transport_TRANSPORT_HTTP:
			servable = caps.ServesURLServers
			why = unreachable(decl.GetUrl())
		case agentdv1.Transport_TRANSPORT_CONNECTOR:
			servable = caps.ServesConnectors
		case agentdv1.Transport_TRANSPORT_STDIO:
		default:
			t.Fatalf("server %q has the transport %v", sp.name, sp.transport)
		}
		if servable && why == "" && caps.ServerProblem != nil {
			why = caps.ServerProblem(decl)
		}
		mayServe := servable && why == "" && !mcpdecl.CouldGate(decl.GetRequireApproval()) &&
			len(requiresApprovalServedBy(agent, decl, agentTools)) == 0
		switch sp.placement {
		case agentdv1.Placement_PLACEMENT_PROVIDER:
			atProvider++
			if !mayServe || strategy == agentdv1.MCPStrategy_MCP_STRATEGY_CLIENT {
				t.Fatalf("server %q (%v, strategy %v) runs at %s, which may not serve it", sp.name, sp.transport, strategy, agent.GetProvider())
			}
		case agentdv1.Placement_PLACEMENT_BRIDGE:
			switch {
			case strategy == agentdv1.MCPStrategy_MCP_STRATEGY_SERVER:
				t.Fatalf("mcp_strategy SERVER accepted the bridged server %q", sp.name)
			case sp.transport == agentdv1.Transport_TRANSPORT_CONNECTOR:
				t.Fatalf("the connector %q runs in the bridge, which cannot reach it", sp.name)
			case mayServe && strategy != agentdv1.MCPStrategy_MCP_STRATEGY_CLIENT:
				t.Fatalf("mcp_strategy %v left %q in the bridge, though %s may serve it", strategy, sp.name, agent.GetProvider())
			}
		default:
			t.Fatalf("server %q has the placement %v", sp.name, sp.placement)
		}
	}
	if limit := caps.MaxProviderServers; limit > 0 && atProvider > limit {
		t.Fatalf("%d servers at %s, which takes %d", atProvider, agent.GetProvider(), limit)
	}
	for _, d := range p.providerServers() {
		if d.GetName() == "" {
			t.Fatalf("a provider-side server goes to the provider unnamed: %v", d)
		}
	}
}

// Bits of FuzzResumeCheckpoint's answers argument, besides the low ones
// (approval k is approved when bit k%48 is set).
const (
	answerWithDigests = 1 << 48 // decisions carry the requests' digests
	answerDropLast    = 1 << 49 // the last answer is missing
	recordShift       = 50      // 2 bits: the record is unclaimed, claimed by a dead resume, claimed by a live one, missing
)

// FuzzResumeCheckpoint proves that whatever bytes a paused generation's
// record holds, resuming it (through Generate, answering every request
// the checkpoint says is pending) never panics and never fails as
// Internal or Unknown: an unreadable checkpoint is FailedPrecondition and
// leaves the record as it was, as does every refusal before the
// generation starts; a resume either completes (and the record is gone)
// or pauses again (and the record holds a checkpoint that a later resume
// can read, waiting for exactly the requests the paused event lists).
//
// The seeds are a checkpoint as pause writes it, resumed every way the
// answers bits allow, and broken copies of it: truncated, bit-flipped,
// of another version, without its turn.
func FuzzResumeCheckpoint(f *testing.F) {
	valid := resumableCheckpoint()
	data := marshal(f, valid)
	f.Add(data, uint64(0))
	f.Add(data, uint64(answerWithDigests|1))
	f.Add(data, uint64(answerWithDigests|3))
	f.Add(data, uint64(answerWithDigests|3|1<<recordShift))
	f.Add(data, uint64(2<<recordShift))
	f.Add(data, uint64(3<<recordShift))
	f.Add(data, uint64(answerDropLast))
	f.Add(data[:len(data)/2], uint64(0))
	f.Add(data[:len(data)-1], uint64(0))
	flipped := bytes.Clone(data)
	flipped[len(flipped)/3] ^= 0x10
	flipped[len(flipped)*2/3] ^= 0x01
	f.Add(flipped, uint64(1))
	f.Add([]byte{}, uint64(0))
	f.Add([]byte("\x08\x02"), uint64(0)) // version 2
	noTurn := proto.Clone(valid).(*statev1.Checkpoint)
	noTurn.Turn = nil
	f.Add(marshal(f, noTurn), uint64(0))
	otherProvider := proto.Clone(valid).(*statev1.Checkpoint)
	otherProvider.Provider, otherProvider.Model = "script", "m"
	f.Add(marshal(f, otherProvider), uint64(0))
	settled := proto.Clone(valid).(*statev1.Checkpoint)
	settled.Turn.States, settled.Turn.Calls = settled.Turn.States[:1], settled.Turn.Calls[:1]
	f.Add(marshal(f, settled), uint64(0))

	f.Fuzz(func(t *testing.T, data []byte, answers uint64) {
		const id = "gen_fuzz"
		cp := &statev1.Checkpoint{}
		readable := proto.Unmarshal(data, cp) == nil && cp.GetVersion() == record.Version && cp.GetTurn() != nil
		if !readable {
			cp = &statev1.Checkpoint{Provider: "mock"}
		}

		checkpoints := newMemCheckpoints()
		now := time.Now()
		record := answers >> recordShift & 3
		switch record {
		case 0:
			checkpoints.put(id, store.Record{Data: data, Version: 1})
		case 1:
			checkpoints.put(id, store.Record{Data: data, Version: 2, Claimed: true, ClaimedAt: now.Add(-time.Hour)})
		case 2:
			checkpoints.put(id, store.Record{Data: data, Version: 2, Claimed: true, ClaimedAt: now})
		}
		before, _ := checkpoints.Get(t.Context(), "", id)
		own, served := offeredTools(cp)
		s := New(Options{
			Providers:   scriptedProviders(t),
			Bridge:      fuzzBridge{tools: served},
			Config:      config.Default().Generation,
			Checkpoints: checkpoints,
		})
		stream := &fuzzStream{ctx: t.Context(), first: &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: resumeAnswering(id, cp, own, answers)}}}

		err := s.Generate(stream)

		code := status.Code(err)
		if code == codes.Internal || code == codes.Unknown {
			t.Fatalf("resuming failed with %v", err)
		}
		events := stream.events()
		after, stored := checkpoints.Get(t.Context(), "", id)
		unchanged := func(what string) {
			if stored != nil || !bytes.Equal(after.Data, before.Data) || after.Version != before.Version || after.Claimed != before.Claimed || checkpoints.claims != 0 {
				t.Fatalf("%s, yet the record changed (claims %d): %+v, then %+v, %v", what, checkpoints.claims, before, after, stored)
			}
		}
		missing := record == 3
		if !readable && !missing {
			if code != codes.FailedPrecondition {
				t.Fatalf("an unreadable checkpoint: %v, want FailedPrecondition", err)
			}
			unchanged("an unreadable checkpoint was refused")
		}
		if len(events) == 0 {
			if err == nil {
				t.Fatal("a resume ended without an event or an error")
			}
			if !missing {
				unchanged(fmt.Sprintf("the resume was refused (%v)", err))
			}
			return
		}
		switch last := events[len(events)-1]; {
		case last.GetCompleted() != nil:
			if err != nil || stored == nil {
				t.Fatalf("a completed resume returned %v, and its record is %+v", err, after)
			}
		case last.GetPaused() != nil:
			if err != nil {
				t.Fatalf("a paused resume returned %v", err)
			}
			checkPausedAgain(t, last.GetPaused(), after, stored)
		default:
			if err == nil {
				t.Fatalf("a resume ended with %v and no error", last)
			}
		}
	})
}

// checkPausedAgain checks that a generation paused again is stored
// unclaimed, resumable, waiting for what paused lists.
func checkPausedAgain(t *testing.T, paused *agentdv1.GenerationPaused, rec store.Record, err error) {
	t.Helper()
	if err != nil || rec.Claimed {
		t.Fatalf("a generation paused again is stored as %+v, %v", rec, err)
	}
	cp := &statev1.Checkpoint{}
	if err := proto.Unmarshal(rec.Data, cp); err != nil || cp.GetVersion() != record.Version || cp.GetTurn() == nil || cp.GetGenerationId() != paused.GetGenerationId() {
		t.Fatalf("a generation paused again stored a checkpoint that cannot be resumed: %v, %v", cp, err)
	}
	a := askedOf(cp.GetTurn())
	approvals, functions := a.approvals, a.functions
	var stored, listed []string
	for _, a := range approvals {
		stored = append(stored, a.GetId())
	}
	for _, fc := range functions {
		stored = append(stored, fc.GetCallId())
	}
	for _, a := range paused.GetApprovalRequests() {
		listed = append(listed, a.GetId())
	}
	for _, fc := range paused.GetFunctionCalls() {
		listed = append(listed, fc.GetCallId())
	}
	if !slices.Equal(stored, listed) {
		t.Fatalf("the checkpoint waits for %v, the paused event lists %v", stored, listed)
	}
}

// resumableCheckpoint is a checkpoint as pause writes it: one tool turn
// whose first call ran, whose second (an MCP tool) waits for approval,
// whose third is a function call waiting for its result, and whose fourth
// (a function tool) waits for approval.
func resumableCheckpoint() *statev1.Checkpoint {
	const args = `{"path":"README.md"}`
	calls := []*agentdv1.ToolCall{
		{Id: "call_1", Name: "read_file", Arguments: args},
		{Id: "call_2", Name: "delete_file", Arguments: args},
		{Id: "call_3", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{Id: "call_4", Name: "send_mail", Arguments: `{"to":"ops"}`},
	}
	assistant := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT}
	for _, c := range calls {
		assistant.Parts = append(assistant.Parts, &agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: c}})
	}
	now := time.Now()
	return &statev1.Checkpoint{
		Version:      record.Version,
		GenerationId: "gen_fuzz",
		Provider:     "mock",
		Messages:     []*agentdv1.Message{userMessage("Tidy the repository."), assistant},
		Added:        []*agentdv1.Message{assistant},
		Usage:        &agentdv1.Usage{InputTokens: 120, OutputTokens: 30},
		ToolTurns:    1,
		Turn: &statev1.PausedTurn{Turn: 1, Calls: calls, States: []*statev1.CallState{
			{State: &statev1.CallState_Result{Result: &agentdv1.ToolResult{ToolCallId: "call_1", Name: "read_file", Output: "# agentd"}}},
			{State: &statev1.CallState_Approval{Approval: &agentdv1.ApprovalRequest{
				Id: "approval_call_2", ToolCallId: "call_2", ServerName: "tools", ToolName: "delete_file", Arguments: args,
				Prompt: "Allow delete_file to run?", Digest: approvalDigest("tools", "delete_file", args),
			}}},
			{State: &statev1.CallState_FunctionCall{FunctionCall: &agentdv1.FunctionCall{CallId: "call_3", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{State: &statev1.CallState_Approval{Approval: &agentdv1.ApprovalRequest{
				Id: "approval_call_4", ToolCallId: "call_4", ToolName: "send_mail", Arguments: `{"to":"ops"}`,
				Prompt: "Allow send_mail to run?", Digest: approvalDigest("", "send_mail", `{"to":"ops"}`),
			}}},
		}},
		Answered:  []string{"approval_call_0"},
		PausedAt:  timestamppb.New(now),
		ExpiresAt: timestamppb.New(now.Add(time.Hour)),
		Claim: &statev1.Claim{
			ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: "approval_call_2", Approved: true}},
			ClaimedAt:         timestamppb.New(now.Add(-time.Hour)),
		},
	}
}

// resumeAnswering is a resume of generation id, by an agent with the
// function tools own and the "tools" server, that answers each request
// cp's turn waits for, as answers' bits say.
func resumeAnswering(id string, cp *statev1.Checkpoint, own []*agentdv1.FunctionTool, answers uint64) *agentdv1.ResumeGeneration {
	r := &agentdv1.ResumeGeneration{
		GenerationId: id,
		Agent: &agentdv1.Agent{Provider: cp.GetProvider(), Model: cp.GetModel(), Tools: own, Mcps: []*agentdv1.MCPServer{
			{Name: "tools", Transport: &agentdv1.MCPServer_Command{Command: "tools-mcp"}},
		}},
	}
	a := askedOf(cp.GetTurn())
	approvals, functions := a.approvals, a.functions
	for k, a := range approvals {
		d := &agentdv1.ApprovalDecision{RequestId: a.GetId(), Approved: answers>>(k%48)&1 == 1}
		if answers&answerWithDigests != 0 {
			d.Digest = a.GetDigest()
		}
		r.ApprovalDecisions = append(r.ApprovalDecisions, d)
	}
	for k, fc := range functions {
		r.FunctionResults = append(r.FunctionResults, &agentdv1.FunctionResult{CallId: fc.GetCallId(), Output: fmt.Sprintf(`{"result":%d}`, k)})
	}
	if answers&answerDropLast != 0 {
		switch {
		case len(r.FunctionResults) > 0:
			r.FunctionResults = r.FunctionResults[:len(r.FunctionResults)-1]
		case len(r.ApprovalDecisions) > 0:
			r.ApprovalDecisions = r.ApprovalDecisions[:len(r.ApprovalDecisions)-1]
		}
	}
	return r
}

// offeredTools are the tools the resumed agent offers for the calls of
// cp's turn whose names a tool may have, so approved calls can run: a
// function tool for a call that waits for a function result or for an
// approval without a server, the "tools" server's tool for the others.
func offeredTools(cp *statev1.Checkpoint) ([]*agentdv1.FunctionTool, []*bridgev1.ServerTools) {
	functions := make(map[string]bool)
	for _, st := range cp.GetTurn().GetStates() {
		if a := st.GetApproval(); a != nil && a.GetServerName() == "" {
			functions[a.GetToolName()] = true
		}
		if fc := st.GetFunctionCall(); fc != nil {
			functions[fc.GetName()] = true
		}
	}
	var own []*agentdv1.FunctionTool
	var served []*bridgev1.Tool
	seen := make(map[string]bool)
	for _, c := range cp.GetTurn().GetCalls() {
		name := c.GetName()
		if !toolNamePattern.MatchString(name) || seen[name] {
			continue
		}
		seen[name] = true
		if functions[name] {
			own = append(own, &agentdv1.FunctionTool{Name: name})
		} else {
			served = append(served, &bridgev1.Tool{Name: name})
		}
	}
	return own, []*bridgev1.ServerTools{{ServerName: "tools", Tools: served}}
}

// fuzzBridge is a Bridge whose sessions offer tools, each call of which
// answers "ok".
type fuzzBridge struct{ tools []*bridgev1.ServerTools }

func (b fuzzBridge) OpenSession(context.Context, *bridgev1.OpenSessionRequest, bridgeclient.Answerer) (bridgeclient.Session, error) {
	return b, nil
}

func (b fuzzBridge) ListTools(context.Context) ([]*bridgev1.ServerTools, error) { return b.tools, nil }

func (b fuzzBridge) CallTool(context.Context, string, string, string) (*bridgev1.CallToolResponse, error) {
	return &bridgev1.CallToolResponse{Output: "ok"}, nil
}

func (fuzzBridge) Close(context.Context) {}

// fuzzStream is a Generate stream whose client sends first, then
// half-closes and reads every event.
type fuzzStream struct {
	grpc.ServerStream // nil: Generate uses none of its other methods
	ctx               context.Context

	mu    sync.Mutex
	first *agentdv1.GenerateRequest
	sent  []*agentdv1.GenerateResponse
}

func (s *fuzzStream) Context() context.Context { return s.ctx }

func (s *fuzzStream) Recv() (*agentdv1.GenerateRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.first; m != nil {
		s.first = nil
		return m, nil
	}
	return nil, io.EOF
}

func (s *fuzzStream) Send(ev *agentdv1.GenerateResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, ev)
	return nil
}

func (s *fuzzStream) events() []*agentdv1.GenerateResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// memCheckpoints is a store.Checkpoints in memory, for the default
// tenant, with the contract's claim rules. It counts claims.
type memCheckpoints struct {
	mu      sync.Mutex
	records map[string]store.Record
	claims  int
}

var _ store.Checkpoints = (*memCheckpoints)(nil)

func newMemCheckpoints() *memCheckpoints {
	return &memCheckpoints{records: make(map[string]store.Record)}
}

func (m *memCheckpoints) put(id string, rec store.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[id] = rec
}

func (m *memCheckpoints) Save(_ context.Context, _, id string, data []byte, _ time.Time, ifVersion int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[id]
	if ifVersion != 0 && (!ok || rec.Version != ifVersion) {
		return fault.New(fault.Conflict, "the paused generation %q was taken over by another resume, or is gone", id)
	}
	m.records[id] = store.Record{Data: bytes.Clone(data), Version: rec.Version + 1}
	return nil
}

func (m *memCheckpoints) Get(_ context.Context, _, id string) (store.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[id]
	if !ok {
		return store.Record{}, fault.New(fault.NotFound, "no paused generation %q", id)
	}
	return rec, nil
}

func (m *memCheckpoints) Claim(_ context.Context, _, id string, version int64, data []byte, now, staleBefore time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[id]
	if !ok || rec.Version != version || rec.Claimed && !rec.ClaimedAt.Before(staleBefore) {
		return fault.New(fault.Conflict, "the paused generation %q is being resumed by another request, or was resumed", id)
	}
	m.claims++
	m.records[id] = store.Record{Data: bytes.Clone(data), Version: version + 1, Claimed: true, ClaimedAt: now}
	return nil
}

func (m *memCheckpoints) Renew(_ context.Context, _, id string, version int64, data []byte, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[id]
	if !ok || rec.Version != version || !rec.Claimed {
		return fault.New(fault.Conflict, "the paused generation %q was taken over by another resume, or is gone", id)
	}
	rec.ClaimedAt = now
	if data != nil {
		rec.Data = bytes.Clone(data)
	}
	m.records[id] = rec
	return nil
}

func (m *memCheckpoints) Delete(_ context.Context, _, id string, ifVersion int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec, ok := m.records[id]; ok && (ifVersion == 0 || rec.Version == ifVersion) {
		delete(m.records, id)
	}
	return nil
}

// Count counts every record, as if each expired a day from now.
func (m *memCheckpoints) Count(context.Context, string) (int, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.records) == 0 {
		return 0, time.Time{}, nil
	}
	return len(m.records), time.Now().Add(24 * time.Hour), nil
}

func (*memCheckpoints) Close() error { return nil }

// allProviders registers every provider agentd serves, as internal/app
// does, each with a key and a base URL (a provider without what it needs
// refuses its requests before they are planned); planning reaches none of
// them over the network.
func allProviders(tb testing.TB) *providers.Registry {
	keys := make(map[string]config.Provider)
	for _, a := range registry.Declared {
		keys[a.Name] = config.Provider{APIKey: "sk-test", BaseURL: "https://llm.example"}
	}
	reg, err := registry.New(keys)
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// scriptedProviders registers the providers that need no network.
func scriptedProviders(tb testing.TB) *providers.Registry {
	reg, err := providers.NewRegistry(scripted.Mock(), scripted.Script())
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

func userMessage(text string) *agentdv1.Message {
	return &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text}}}}
}

func marshal(tb testing.TB, m proto.Message) []byte {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}
