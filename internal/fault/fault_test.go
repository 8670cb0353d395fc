package fault

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	secret := errors.New("dial https://host/key-in-path: refused")
	tests := []struct {
		name        string
		err         error
		wantCode    codes.Code
		wantMessage string
		wantDetails []proto.Message
	}{
		{name: "unclassified errors are internal and hidden", err: secret, wantCode: codes.Internal, wantMessage: "internal error"},
		{name: "context canceled", err: fmt.Errorf("x: %w", context.Canceled), wantCode: codes.Canceled, wantMessage: "canceled"},
		{name: "deadline", err: context.DeadlineExceeded, wantCode: codes.DeadlineExceeded, wantMessage: "deadline exceeded"},
		{name: "wrapped cause is shown", err: Wrap(Unavailable, errors.New("refused"), "server %q", "a"), wantCode: codes.Unavailable, wantMessage: `server "a": refused`},
		{name: "hidden cause is not shown", err: Hide(Unavailable, secret, "cannot connect"), wantCode: codes.Unavailable, wantMessage: "cannot connect"},
		{
			name:        "violations become BadRequest",
			err:         InvalidRequest([]Violation{{Field: "a", Description: "bad"}, {Field: "b", Description: "worse"}}),
			wantCode:    codes.InvalidArgument,
			wantMessage: "invalid request: a: bad; b: worse",
			wantDetails: []proto.Message{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "a", Description: "bad"}, {Field: "b", Description: "worse"}}}},
		},
		{
			name:        "reason becomes ErrorInfo",
			err:         fmt.Errorf("outer: %w", New(Timeout, "slow").WithInfo("MCP_TIMEOUT", map[string]string{"server": "s"})),
			wantCode:    codes.DeadlineExceeded,
			wantMessage: "slow",
			wantDetails: []proto.Message{&errdetails.ErrorInfo{Reason: "MCP_TIMEOUT", Domain: "agentd", Metadata: map[string]string{"server": "s"}}},
		},
		{
			name:        "a limit becomes RetryInfo and QuotaFailure",
			err:         &Error{Kind: Exhausted, Msg: "over", RetryDelay: 1500 * time.Millisecond, Quota: []QuotaViolation{{Subject: "tenant:acme", Description: "limits.x"}}},
			wantCode:    codes.ResourceExhausted,
			wantMessage: "over",
			wantDetails: []proto.Message{
				&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)},
				&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "tenant:acme", Description: "limits.x"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := Status(tt.err)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMessage {
				t.Errorf("Status = %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantMessage)
			}
			var details []proto.Message
			for _, d := range st.Details() {
				details = append(details, d.(proto.Message))
			}
			if diff := cmp.Diff(tt.wantDetails, details, protocmp.Transform()); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want Kind
	}{
		{New(Permission, "no"), Permission},
		{fmt.Errorf("wrapped: %w", New(Conflict, "twice")), Conflict},
		{context.Canceled, Canceled},
		{context.DeadlineExceeded, Timeout},
		{errors.New("plain"), Internal},
	} {
		if got := KindOf(tt.err); got != tt.want {
			t.Errorf("KindOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// Every kind but Internal survives a gRPC hop: KindOfCode inverts Code.
func TestKindOfCode(t *testing.T) {
	t.Parallel()
	for k := Internal; k <= Canceled; k++ {
		got, ok := KindOfCode(k.Code())
		if k == Internal {
			if ok {
				t.Errorf("KindOfCode(Internal) = %v, true; want false", got)
			}
			continue
		}
		if !ok || got != k {
			t.Errorf("KindOfCode(%v) = %v, %v; want %v", k.Code(), got, ok, k)
		}
	}
	for _, c := range []codes.Code{codes.Unknown, codes.DataLoss, codes.OK} {
		if _, ok := KindOfCode(c); ok {
			t.Errorf("KindOfCode(%v) is a kind; want none", c)
		}
	}
}
