package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
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
	if err == nil {
		// Its headers and first comment go out before the follow begins:
		// a generation it will not find must be an HTTP error first.
		err = s.stored(ctx, tenant, id)
	}
	if err != nil {
		return fault.GRPC(err)
	}
	if err := stream.SendHeader(sseHeaders); err != nil {
		return err
	}
	blocks := s.openBlocks(tenant, id)
	defer s.releaseBlocks(tenant, id, blocks)
	w := &sseStream{send: stream.Send, blocks: blocks}
	if err := w.chunk(heartbeat); err != nil {
		return err
	}
	err = s.events.FollowTo(ctx, tenant, id, after, record.Sink{Send: w.event, Flush: w.flush, Idle: w.beat, IdleEvery: heartbeatEvery})
	return followStatus(w.end(ctx, err))
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
// stream, each holding whole events or a comment only. It follows the
// generation on the goroutine of the stream's handler, the one that owns
// its Send, with no goroutine or channel of its own: the events at hand
// go out in one chunk (up to maxChunkBytes) once the follower is about to
// block, on the store or waiting for more, so that a stream behind the
// generation catches up in fewer writes and flushes, not one of each per
// event; and a heartbeat whenever heartbeatEvery passes without a chunk.
type sseStream struct {
	send   func(*agentdv1.StreamGenerationEventsResponse) error
	blocks *genBlocks
	buf    []byte // the events gathered for the next chunk, reused: Send has encoded it when it returns
	failed error  // an event could not be encoded or a send failed: the stream ends with nothing more
}

// maxChunkBytes bounds a chunk of several events (one event may be
// larger).
const maxChunkBytes = 64 << 10

// keepBytes is the most a stream keeps of a buffer between chunks: what
// a few events take.
const keepBytes = 4 << 10

// event gathers ev for the next chunk, which it writes once it holds
// maxChunkBytes.
func (w *sseStream) event(ev *agentdv1.GenerateResponse) error {
	var err error
	if w.buf, err = w.blocks.append(w.buf, ev); err != nil {
		w.failed = err
		return err
	}
	if len(w.buf) >= maxChunkBytes {
		return w.flush()
	}
	return nil
}

// flush writes the events gathered, if any, in one chunk.
func (w *sseStream) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.chunk(w.buf)
	w.buf = w.buf[:0]
	if cap(w.buf) > keepBytes {
		w.buf = nil // a catch-up's chunk: a thousand idle streams would keep theirs
	}
	return err
}

// beat writes a heartbeat.
func (w *sseStream) beat() error { return w.chunk(heartbeat) }

// genBlocks are the latest blocks of one generation, by sequence number:
// in a generation's log a number names one event for good, whether a
// stream has it live or read from the store, so two streams that encode
// it at once store the same block.
type genBlocks struct {
	streams atomic.Int64 // following it
	recent  [blockRing]atomic.Pointer[block]
}

// blockRing is how many of a generation's latest blocks are kept: more
// than a stream may fall behind the others and still be handed the
// events live.
const blockRing = 512

type block struct {
	seq  int64
	data []byte
}

// openBlocks returns the blocks of tenant's generation id, shared by the
// event streams that follow it on this replica (Service.blocks), so that
// each event is encoded once, not once per stream; releaseBlocks gives
// them back. A stream that takes them just as the last one lets go may
// keep them to itself: it encodes for itself alone, no less right.
func (s *Service) openBlocks(tenant, id string) *genBlocks {
	key := generationKey(tenant, id)
	v, ok := s.blocks.Load(key)
	if !ok {
		v, _ = s.blocks.LoadOrStore(key, &genBlocks{})
	}
	g := v.(*genBlocks)
	g.streams.Add(1)
	return g
}

// releaseBlocks ends one stream's use of g: the last one's drops them.
func (s *Service) releaseBlocks(tenant, id string, g *genBlocks) {
	if g.streams.Add(-1) == 0 {
		s.blocks.CompareAndDelete(generationKey(tenant, id), g)
	}
}

// append appends ev's block to buf: encoded by the first stream that
// needs it. One without a sequence number (an ephemeral event) is
// encoded each time.
func (g *genBlocks) append(buf []byte, ev *agentdv1.GenerateResponse) ([]byte, error) {
	seq := ev.GetSequence()
	if seq == 0 {
		data, err := eventBlock(ev)
		return append(buf, data...), err
	}
	slot := &g.recent[seq%blockRing]
	if b := slot.Load(); b != nil && b.seq == seq {
		return append(buf, b.data...), nil
	}
	data, err := eventBlock(ev)
	if err != nil {
		return buf, err
	}
	slot.Store(&block{seq: seq, data: data})
	return append(buf, data...), nil
}

// eventBlock is one event's block: its id (none for an ephemeral event,
// which has no sequence number and so must not move the client's
// Last-Event-ID), its kind and its JSON, which protojson writes on one
// line.
func eventBlock(ev *agentdv1.GenerateResponse) ([]byte, error) {
	data, err := protojson.Marshal(ev)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "writing event %d as JSON", ev.GetSequence())
	}
	var b []byte
	if seq := ev.GetSequence(); seq != 0 {
		b = strconv.AppendInt(append(b, "id: "...), seq, 10)
		b = append(b, '\n')
	}
	if kind := ev.ProtoReflect().WhichOneof(eventKinds); kind != nil {
		b = append(append(append(b, "event: "...), kind.Name()...), '\n')
	}
	return append(append(append(b, "data: "...), data...), "\n\n"...), nil
}

// sseError is an error event's data: the status a generation ended with,
// its code as Connect names it (the gRPC code in snake case), as a
// Connect error's JSON has it.
type sseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// end writes the events gathered and how the followed generation ended,
// after err: nothing more once it completed or paused, an error event
// otherwise. A stream that failed, or whose client went away, ends as it
// is.
func (w *sseStream) end(ctx context.Context, err error) error {
	if w.failed != nil {
		return w.failed
	}
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if ferr := w.flush(); ferr != nil {
		return ferr
	}
	if err == nil {
		return nil
	}
	st := status.Convert(followStatus(err))
	data, err := json.Marshal(sseError{Code: connect.Code(st.Code()).String(), Message: st.Message()})
	if err != nil {
		return err
	}
	return w.chunk(append(append([]byte("event: error\ndata: "), data...), "\n\n"...))
}

func (w *sseStream) chunk(data []byte) error {
	if err := w.send(&agentdv1.StreamGenerationEventsResponse{Chunk: &httpbody.HttpBody{ContentType: sseContentType, Data: data}}); err != nil {
		w.failed = err
		return err
	}
	return nil
}
