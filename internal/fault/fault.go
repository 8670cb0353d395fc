// Package fault classifies errors once, near where they happen, and maps
// them to gRPC statuses in one place at each service's edge.
//
// A *Error carries a Kind (what the caller can do about it), a message that
// is safe to show (producers never put secrets in it), and optional details:
// field violations for invalid requests, and a reason with metadata (such
// as the MCP server and request that timed out), and for a limit reached,
// when to retry and which limit it was. Status turns any error
// into a *status.Status; errors that were never classified become Internal
// with a generic message, so nothing unvetted reaches a client.
package fault

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Kind says what went wrong, from the caller's point of view.
type Kind int

// The kinds of error. The zero value is Internal: an error nobody
// classified is our bug.
const (
	Internal           Kind = iota // a bug or an unexpected failure
	Invalid                        // the request is wrong; retrying it will not help
	NotFound                       // something the request names does not exist
	Permission                     // the configuration does not allow it
	Unauthenticated                // the caller did not prove who it is
	Unavailable                    // a dependency could not be reached; retry may help
	Timeout                        // a dependency did not answer in time
	FailedPrecondition             // the system is not in a state that allows it
	Conflict                       // a concurrent request already did it
	Exhausted                      // a limit or quota was reached
	Canceled                       // the caller gave up
)

var kindCodes = map[Kind]codes.Code{
	Internal:           codes.Internal,
	Invalid:            codes.InvalidArgument,
	NotFound:           codes.NotFound,
	Permission:         codes.PermissionDenied,
	Unauthenticated:    codes.Unauthenticated,
	Unavailable:        codes.Unavailable,
	Timeout:            codes.DeadlineExceeded,
	FailedPrecondition: codes.FailedPrecondition,
	Conflict:           codes.Aborted,
	Exhausted:          codes.ResourceExhausted,
	Canceled:           codes.Canceled,
}

// Code is the gRPC code of a kind.
func (k Kind) Code() codes.Code { return kindCodes[k] }

// KindOfCode is the kind whose code is c, for errors that crossed a gRPC
// hop (the bridge's). Codes no kind maps to (OK, Unknown, DataLoss, ...)
// and Internal report false: the error is a bug on the other side.
func KindOfCode(c codes.Code) (Kind, bool) {
	for k, kc := range kindCodes {
		if kc == c && k != Internal {
			return k, true
		}
	}
	return Internal, false
}

func (k Kind) String() string { return k.Code().String() }

// Violation is one problem with one field of a request.
type Violation struct {
	Field       string // dotted path, e.g. "start.agent.mcps[1].read_timeout"
	Description string // what is wrong, without the field's value if it may be secret
}

// QuotaViolation is one limit a request is over: whose limit (Subject,
// e.g. "tenant:acme") and which (Description, e.g. the setting that sets
// it).
type QuotaViolation struct {
	Subject     string
	Description string
}

// Error is a classified error.
type Error struct {
	Kind Kind
	// Msg is shown to clients; it never contains a secret.
	Msg string
	// Violations lists every problem of an Invalid request.
	Violations []Violation
	// Reason and Metadata become a google.rpc.ErrorInfo detail when Reason
	// is set. Metadata values are shown to clients.
	Reason   string
	Metadata map[string]string
	// RetryDelay, when positive, becomes a google.rpc.RetryInfo detail:
	// how long the caller should wait before it tries again.
	RetryDelay time.Duration
	// Quota lists the limits an Exhausted request is over; they become a
	// google.rpc.QuotaFailure detail.
	Quota []QuotaViolation
	// Err is the cause, for errors.Is/As and for logs. Its text is part of
	// Error() only when the producer wrapped it with Wrap, which vouches
	// that it carries no secret.
	Err error
	// showCause says Err's text is safe to show.
	showCause bool
}

// New returns an error of the given kind with a formatted message.
func New(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap classifies err, prefixing its text with a message. The caller vouches
// that err's text carries no secret.
func Wrap(kind Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Err: err, showCause: true}
}

// Hide classifies err with a message of its own; err's text is kept for
// errors.Is/As but never shown.
func Hide(kind Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Err: err}
}

// InvalidRequest returns an Invalid error listing every violation.
func InvalidRequest(violations []Violation) *Error {
	parts := make([]string, len(violations))
	for i, v := range violations {
		parts[i] = v.Field + ": " + v.Description
	}
	return &Error{
		Kind:       Invalid,
		Msg:        "invalid request: " + strings.Join(parts, "; "),
		Violations: slices.Clone(violations),
	}
}

// WithInfo sets the ErrorInfo reason and metadata and returns e.
func (e *Error) WithInfo(reason string, metadata map[string]string) *Error {
	e.Reason = reason
	e.Metadata = maps.Clone(metadata)
	return e
}

func (e *Error) Error() string {
	if e.showCause && e.Err != nil {
		if e.Msg == "" {
			return e.Err.Error()
		}
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf reports the kind of err: its *Error's kind, Canceled or Timeout for
// context errors, Internal otherwise.
func KindOf(err error) Kind {
	var fe *Error
	switch {
	case errors.As(err, &fe):
		return fe.Kind
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	return Internal
}

// Status maps err to a gRPC status: the one place where errors become codes.
// A *Error keeps its message and details; context errors become Canceled or
// DeadlineExceeded; anything else becomes Internal with a generic message
// (log the original before calling Status).
func Status(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	var fe *Error
	if !errors.As(err, &fe) {
		switch {
		case errors.Is(err, context.Canceled):
			return status.New(codes.Canceled, "canceled")
		case errors.Is(err, context.DeadlineExceeded):
			return status.New(codes.DeadlineExceeded, "deadline exceeded")
		}
		return status.New(codes.Internal, "internal error")
	}
	st := status.New(fe.Kind.Code(), fe.Error())
	var details []*errdetails.BadRequest_FieldViolation
	for _, v := range fe.Violations {
		details = append(details, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
	}
	if len(details) > 0 {
		if withDetails, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: details}); err == nil {
			st = withDetails
		}
	}
	if fe.Reason != "" {
		info := &errdetails.ErrorInfo{Reason: fe.Reason, Domain: "agentd", Metadata: fe.Metadata}
		if withDetails, err := st.WithDetails(info); err == nil {
			st = withDetails
		}
	}
	if fe.RetryDelay > 0 {
		if withDetails, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(fe.RetryDelay)}); err == nil {
			st = withDetails
		}
	}
	if len(fe.Quota) > 0 {
		qf := &errdetails.QuotaFailure{}
		for _, v := range fe.Quota {
			qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{Subject: v.Subject, Description: v.Description})
		}
		if withDetails, err := st.WithDetails(qf); err == nil {
			st = withDetails
		}
	}
	return st
}

// GRPC is Status(err).Err(): the error a handler returns.
func GRPC(err error) error {
	if err == nil {
		return nil
	}
	return Status(err).Err()
}
