package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentd/agentd/internal/fault"
)

// heartbeatEvery is how long an event stream stays silent before it
// sends a comment line: proxies and load balancers commonly cut a
// connection idle for 60 s (nginx's proxy_read_timeout, cloud load
// balancers' idle timeouts), and the HTML standard advises a comment
// about every 15 s for that reason. A constant rather than a setting:
// a shorter one only costs bytes, a longer one risks the cut, and 15 s
// is well inside every common idle timeout.
const heartbeatEvery = 15 * time.Second

// sseContentType is the media type of an event stream.
const sseContentType = "text/event-stream"

// sseHeaders go out before the first chunk. Over HTTP they become the
// response's headers: no cache may keep the stream, and nginx, which
// buffers a proxied response by default, passes each chunk on at once.
var sseHeaders = metadata.Pairs("cache-control", "no-cache", "x-accel-buffering", "no")

// heartbeat is the comment line an idle event stream sends; it opens
// every stream too, so that the response's status and headers go out
// before the first event is due.
var heartbeat = []byte(": keepalive\n\n")

// eventKinds is GenerateResponse's oneof of events: an SSE event's type
// is the name of its field.
var eventKinds = (&agentdv1.GenerateResponse{}).ProtoReflect().Descriptor().Oneofs().ByName("event")

// StreamGenerationEvents is FollowGeneration as Server-Sent Events: the
// same events, each written as a text/event-stream event (id: its
// sequence, event: its kind, data: its JSON on one line), a comment line
// whenever the stream has been silent for heartbeatEvery. The
// Last-Event-ID request header (incoming metadata last-event-id), when
// given, wins over the request's after. Before anything is sent, a
// request to follow a generation the caller's tenant does not have is
// NOT_FOUND. Once the response has begun, an HTTP client can no longer
// read the call's status: a generation that failed or was cancelled ends
// the stream with an error event naming the status, and then OK.
func (s *Service) StreamGenerationEvents(req *agentdv1.StreamGenerationEventsRequest, stream grpc.ServerStreamingServer[agentdv1.StreamGenerationEventsResponse]) error {
	ctx := stream.Context()
	after, err := lastEventID(ctx, req.GetAfter())
	if err != nil {
		return fault.GRPC(err)
	}
	id := req.GetGenerationId()
	tenant, err := s.followed(ctx, followFields{"generation_id", "after"}, id, after)
	if err != nil {
		return fault.GRPC(err)
	}
	if err := stream.SendHeader(sseHeaders); err != nil {
		return err
	}
	w := sseStream{send: stream.Send}
	return followStatus(w.relay(ctx, func(ctx context.Context, out func(*agentdv1.GenerateResponse) error) error {
		return s.events.Follow(ctx, tenant, id, after, out)
	}))
}

// lastEventID is the sequence number to follow after: the Last-Event-ID
// header's, which a reconnecting EventSource sends with the id of the
// last event it had, or else after.
func lastEventID(ctx context.Context, after int64) (int64, error) {
	vals := metadata.ValueFromIncomingContext(ctx, "last-event-id")
	if len(vals) == 0 || vals[0] == "" {
		return after, nil
	}
	n, err := strconv.ParseUint(vals[0], 10, 63)
	if err != nil {
		return 0, fault.InvalidRequest([]fault.Violation{{Field: "Last-Event-ID", Description: "must be the id of an event of this stream, a sequence number, got " + strconv.Quote(vals[0])}})
	}
	return int64(n), nil
}

// sseStream writes a followed generation's events as chunks of an event
// stream, each holding whole events or a comment only.
type sseStream struct {
	send func(*agentdv1.StreamGenerationEventsResponse) error
}

// relay runs follow, which passes a generation's events to its out, on a
// goroutine of its own (relay joins it), and writes the events as they
// come; on its own goroutine, the one that owns the stream's Send, it
// writes a heartbeat first and whenever heartbeatEvery passes without a
// chunk. It returns once follow has ended and the stream's end is
// written, or once a send fails.
func (w sseStream) relay(ctx context.Context, follow func(context.Context, func(*agentdv1.GenerateResponse) error) error) error {
	fctx, cancel := context.WithCancel(ctx)
	events := make(chan *agentdv1.GenerateResponse)
	ended := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		ended <- follow(fctx, func(ev *agentdv1.GenerateResponse) error {
			select {
			case events <- ev:
				return nil
			case <-fctx.Done():
				return context.Cause(fctx)
			}
		})
	})
	beat := time.NewTimer(heartbeatEvery)
	defer beat.Stop()
	err := w.chunk(heartbeat)
	for err == nil {
		select {
		case ev := <-events:
			err = w.event(ev)
		case <-beat.C:
			err = w.chunk(heartbeat)
		case ended := <-ended:
			return w.end(ctx, ended)
		}
		beat.Reset(heartbeatEvery)
	}
	return err
}

// event writes one event: its id (none for an ephemeral event, which has
// no sequence number and so must not move the client's Last-Event-ID),
// its kind and its JSON, which protojson writes on one line.
func (w sseStream) event(ev *agentdv1.GenerateResponse) error {
	data, err := protojson.Marshal(ev)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "writing event %d as JSON", ev.GetSequence())
	}
	var b []byte
	if seq := ev.GetSequence(); seq != 0 {
		b = strconv.AppendInt(append(b, "id: "...), seq, 10)
		b = append(b, '\n')
	}
	if kind := ev.ProtoReflect().WhichOneof(eventKinds); kind != nil {
		b = append(append(append(b, "event: "...), kind.Name()...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	return w.chunk(b)
}

// sseError is an error event's data: the status a generation ended with,
// its code as Connect names it (the gRPC code in snake case), as a
// Connect error's JSON has it.
type sseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// end writes how the followed generation ended, after err: nothing more
// once it completed or paused, an error event otherwise. A stream whose
// client went away ends as it is: nobody reads it.
func (w sseStream) end(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	st := status.Convert(followStatus(err))
	data, err := json.Marshal(sseError{Code: connect.Code(st.Code()).String(), Message: st.Message()})
	if err != nil {
		return err
	}
	return w.chunk(append(append([]byte("event: error\ndata: "), data...), "\n\n"...))
}

func (w sseStream) chunk(data []byte) error {
	return w.send(&agentdv1.StreamGenerationEventsResponse{Chunk: &httpbody.HttpBody{ContentType: sseContentType, Data: data}})
}
