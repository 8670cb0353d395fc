package httpapi

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/internal/fault"
)

// eventsRoute is StreamGenerationEvents' HTTP route, which eventStream
// serves rather than the transcoder.
const eventsRoute = "GET /v1/generations/{generation_id}/events"

// eventStream serves StreamGenerationEvents' HTTP route as the event
// stream it is.
//
// A transcoder of the google.api.http routes (vanguard v0.4.0) holds a
// REST call's whole response until the call ends, to answer the call's
// status as the HTTP status: an event stream would reach its client only
// once it ended. This handler instead calls the method on grpcServer (a
// *grpc.Server's ServeHTTP, whose interceptors authenticate and log the
// call as any other) and writes each chunk as it comes, flushed. The
// request's headers become the call's metadata (credentials,
// Last-Event-ID), its ?after= the request's after. A call that fails
// before its first chunk answers the HTTP status of its code, with the
// google.rpc.Status as JSON, as the transcoder answers its routes.
type eventStream struct{ grpc http.Handler }

func (h eventStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &agentdv1.StreamGenerationEventsRequest{GenerationId: r.PathValue("generation_id")}
	if after := r.URL.Query().Get("after"); after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil {
			writeHTTPStatus(w, fault.Status(fault.InvalidRequest([]fault.Violation{{Field: "after", Description: "must be a sequence number, got " + strconv.Quote(after)}})))
			return
		}
		req.After = n
	}
	msg, err := proto.Marshal(req)
	if err != nil {
		writeHTTPStatus(w, status.New(codes.Internal, "encoding the request: "+err.Error()))
		return
	}
	cw := &chunkWriter{w: w, header: make(http.Header)}
	h.grpc.ServeHTTP(cw, grpcCall(r, msg))
	cw.end()
}

// grpcCall is r as the gRPC call of StreamGenerationEvents with the
// request msg: its headers (but the gRPC protocol's own) as metadata,
// its context, its TLS state and peer for the authenticator.
func grpcCall(r *http.Request, msg []byte) *http.Request {
	body := make([]byte, 5, 5+len(msg)) // uncompressed, then the length
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	body = append(body, msg...)
	c := r.Clone(r.Context())
	c.Method, c.URL = http.MethodPost, &url.URL{Path: agentdv1.AgentService_StreamGenerationEvents_FullMethodName}
	c.Proto, c.ProtoMajor, c.ProtoMinor = "HTTP/2", 2, 0
	for k := range c.Header {
		if strings.HasPrefix(k, "Grpc-") || k == "Content-Length" || k == "Content-Encoding" {
			delete(c.Header, k)
		}
	}
	c.Header.Set("Content-Type", "application/grpc+proto")
	c.Header.Set("Te", "trailers")
	c.Body, c.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return c
}

// keepPending is the most a stream keeps of its buffer between messages:
// a large event's buffer goes once it is written.
const keepPending = 4 << 10

// chunkWriter is the ResponseWriter of the gRPC call: it writes each
// message's chunk to w as it comes, after the call's headers, and keeps
// the call's status (written as headers after the messages) for its end.
// The gRPC server calls it from one goroutine at a time.
type chunkWriter struct {
	w       http.ResponseWriter
	header  http.Header // the call's headers, then its status
	code    int         // the HTTP status the gRPC server wrote: not 200 if it refused the call itself
	prefix  [5]byte     // the gRPC prefix of the message being written: compressed, then its length
	got     int         // how much of prefix was written
	pending []byte      // what was written of a message that came in pieces
	began   bool        // the event stream's headers are out
}

func (c *chunkWriter) Header() http.Header { return c.header }

func (c *chunkWriter) WriteHeader(code int) { c.code = code }

func (c *chunkWriter) Flush() {
	if c.began {
		_ = http.NewResponseController(c.w).Flush()
	}
}

// Write takes the gRPC messages written, in any pieces, and writes the
// chunk of each that is whole. The gRPC server writes a message's prefix
// and then the message: one written whole is read where it is, not
// copied.
func (c *chunkWriter) Write(p []byte) (int, error) {
	if c.code != 0 && c.code != http.StatusOK {
		return len(p), nil // the gRPC server's own refusal: end answers it
	}
	n := len(p)
	for {
		if c.got < len(c.prefix) {
			k := copy(c.prefix[c.got:], p)
			c.got, p = c.got+k, p[k:]
			if c.got < len(c.prefix) {
				return n, nil
			}
		}
		msg, whole := c.message(&p)
		if !whole {
			return n, nil
		}
		if err := c.chunk(msg); err != nil {
			return 0, err
		}
		c.got, c.pending = 0, c.pending[:0]
		if cap(c.pending) > keepPending {
			c.pending = nil
		}
		if len(p) == 0 {
			return n, nil
		}
	}
}

// message takes from *p what it holds of the message whose prefix is
// written, and returns the message once it is whole.
func (c *chunkWriter) message(p *[]byte) ([]byte, bool) {
	size := int(binary.BigEndian.Uint32(c.prefix[1:]))
	if len(c.pending) == 0 && len(*p) >= size {
		msg := (*p)[:size]
		*p = (*p)[size:]
		return msg, true
	}
	k := min(size-len(c.pending), len(*p))
	c.pending = append(c.pending, (*p)[:k]...)
	*p = (*p)[k:]
	return c.pending, len(c.pending) == size
}

// chunk writes one message's chunk, after the stream's headers the
// first time: the call's own (Cache-Control, X-Accel-Buffering), not
// gRPC's.
func (c *chunkWriter) chunk(msg []byte) error {
	contentType, data, err := httpBodyOf(msg)
	if err != nil {
		return err
	}
	if !c.began {
		h := c.w.Header()
		for k, vv := range c.header {
			if k != "Content-Type" && k != "Trailer" && !strings.HasPrefix(k, "Grpc-") {
				h[k] = vv
			}
		}
		h.Set("Content-Type", string(contentType))
		c.w.WriteHeader(http.StatusOK)
		c.began = true
	}
	_, err = c.w.Write(data)
	return err
}

// The fields that httpBodyOf reads: StreamGenerationEventsResponse's
// chunk, and its google.api.HttpBody's content_type and data.
const (
	chunkField       = 1
	contentTypeField = 1
	dataField        = 2
)

// httpBodyOf reads msg, a StreamGenerationEventsResponse in protobuf's
// binary encoding, for its chunk's content type and data, where they are:
// one stream's thousand chunks then cost no message, string or copy each.
func httpBodyOf(msg []byte) (contentType, data []byte, err error) {
	chunk, err := bytesField(msg, chunkField)
	if err != nil {
		return nil, nil, err
	}
	if contentType, err = bytesField(chunk, contentTypeField); err != nil {
		return nil, nil, err
	}
	data, err = bytesField(chunk, dataField)
	return contentType, data, err
}

// bytesField returns the value of field num, of the bytes wire type, in
// msg: its last, as protobuf reads a field given twice; nil if absent.
func bytesField(msg []byte, num protowire.Number) ([]byte, error) {
	var value []byte
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		msg = msg[k:]
		if n == num && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(msg)
			if k < 0 {
				return nil, protowire.ParseError(k)
			}
			value, msg = v, msg[k:]
			continue
		}
		k = protowire.ConsumeFieldValue(n, typ, msg)
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		msg = msg[k:]
	}
	return value, nil
}

// end answers a call that sent no chunk with its status. One that did
// has ended its stream itself: an HTTP client reads no status after the
// body began.
func (c *chunkWriter) end() {
	if !c.began {
		writeHTTPStatus(c.w, c.status())
	}
}

// status is the call's status, from the headers the gRPC server wrote.
func (c *chunkWriter) status() *status.Status {
	if bin := c.header.Get("Grpc-Status-Details-Bin"); bin != "" {
		var p spb.Status
		if b, err := base64.RawStdEncoding.DecodeString(bin); err == nil && proto.Unmarshal(b, &p) == nil {
			return status.FromProto(&p)
		}
	}
	code, err := strconv.Atoi(c.header.Get("Grpc-Status"))
	if err != nil {
		return status.Newf(codes.Internal, "the gRPC server answered HTTP %d without a status", c.code)
	}
	msg, err := url.PathUnescape(c.header.Get("Grpc-Message"))
	if err != nil {
		msg = c.header.Get("Grpc-Message")
	}
	return status.New(codes.Code(code), msg)
}

// httpStatuses are the HTTP statuses of the gRPC codes, as google.api.http
// maps them (and the transcoder with it).
var httpStatuses = [...]int{
	codes.OK:                 http.StatusOK,
	codes.Canceled:           499, // nginx's "client closed request"
	codes.Unknown:            http.StatusInternalServerError,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.Aborted:            http.StatusConflict,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Internal:           http.StatusInternalServerError,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DataLoss:           http.StatusInternalServerError,
	codes.Unauthenticated:    http.StatusUnauthorized,
}

// writeHTTPStatus answers st as an HTTP status and the google.rpc.Status
// as JSON.
func writeHTTPStatus(w http.ResponseWriter, st *status.Status) {
	code := http.StatusInternalServerError
	if int(st.Code()) < len(httpStatuses) {
		code = httpStatuses[st.Code()]
	}
	body, err := protojson.Marshal(st.Proto())
	if err != nil {
		body = []byte(`{"code":13,"message":"encoding the status failed"}`)
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, body)
}
