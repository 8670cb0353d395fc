package httpapi

import (
	"context"
	"math"
	"strconv"

	errdetails "google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// UnaryRetryAfter and StreamRetryAfter give an error that says when to
// retry (a google.rpc.RetryInfo: a tenant over its limits) a
// "retry-after" header of whole seconds, rounded up: the header HTTP
// clients read beside a 429 or a 503. The transcoder passes it on to HTTP
// clients; gRPC clients see it as header metadata. Install them first,
// so that they see every error.
func UnaryRetryAfter(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	res, err := handler(ctx, req)
	if after, ok := retryAfter(err); ok {
		_ = grpc.SetHeader(ctx, metadata.Pairs("retry-after", after))
	}
	return res, err
}

// StreamRetryAfter is UnaryRetryAfter for streams: an error before the
// stream sent anything carries the header; later, headers have gone.
func StreamRetryAfter(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	if after, ok := retryAfter(err); ok {
		_ = ss.SetHeader(metadata.Pairs("retry-after", after))
	}
	return err
}

// retryAfter is the RetryInfo delay of err's status in whole seconds,
// rounded up, if it has one.
func retryAfter(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return strconv.FormatFloat(math.Ceil(ri.GetRetryDelay().AsDuration().Seconds()), 'f', 0, 64), true
		}
	}
	return "", false
}
