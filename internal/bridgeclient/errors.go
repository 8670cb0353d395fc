package bridgeclient

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/policy"
)

// translateError maps a bridge status to a fault: every classified kind
// keeps its meaning and details across the hop (the bridge's messages
// carry no secrets); a bridge that finds a request invalid keeps its field
// violations; Internal, Unknown and the like are our bug and hide their
// text.
func translateError(err error) error {
	if errors.Is(err, io.EOF) {
		return fault.New(fault.Unavailable, "the bridge closed the session stream")
	}
	st, ok := status.FromError(err)
	if !ok {
		return fault.Hide(fault.Internal, err, "bridge call failed")
	}
	if st.Code() == codes.Canceled {
		return context.Canceled
	}
	kind, ok := fault.KindOfCode(st.Code())
	if !ok {
		return fault.Hide(fault.Internal, err, "bridge call failed")
	}
	fe := &fault.Error{Kind: kind, Msg: st.Message(), Err: err}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			fe.Reason, fe.Metadata = d.GetReason(), d.GetMetadata()
		case *errdetails.BadRequest:
			for _, fv := range d.GetFieldViolations() {
				fe.Violations = append(fe.Violations, fault.Violation{Field: fv.GetField(), Description: fv.GetDescription()})
			}
		}
	}
	return fe
}

// serverField matches the start of a bridge field path: the server, and
// the transport whose fields an agentd declaration holds directly.
var serverField = regexp.MustCompile(`^servers\[(\d+)\](?:\.(?:http|stdio)\b)?`)

// RelocateViolations rewrites the bridge's field paths ("servers[1].ref",
// "servers[1].stdio.env") in err, an error of OpenSession, to the
// request's ("start.agent.mcps[3].ref", "start.agent.mcps[3].env"), given
// each bridged server's path in fields. The code stays the bridge's:
// PermissionDenied when its configuration's rules are all that refuse the
// servers (policy.Refusal).
func RelocateViolations(err error, fields []string) error {
	var fe *fault.Error
	if !errors.As(err, &fe) || len(fe.Violations) == 0 {
		return err
	}
	vs := make([]fault.Violation, len(fe.Violations))
	for i, v := range fe.Violations {
		if m := serverField.FindStringSubmatch(v.Field); m != nil {
			if n, _ := strconv.Atoi(m[1]); n < len(fields) {
				v.Field = fields[n] + v.Field[len(m[0]):]
			}
		}
		vs[i] = v
	}
	if fe.Kind == fault.Permission {
		return policy.Refusal(nil, vs)
	}
	out := fault.InvalidRequest(vs)
	out.Kind = fe.Kind
	return out
}

// Refusal is the answer that fails a server's request with err, as the
// bridge carries it: its status, with details.
func Refusal(err error) *bridgev1.AnswerServerRequestRequest {
	st := fault.Status(err).Proto()
	return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Error{Error: &bridgev1.CallError{
		Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}}}
}
