package mcpconn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decoded is a message in a comparable form.
type decoded struct {
	Request bool
	ID      any
	Method  string
	Params  string
	Result  string
	Error   *jsonrpc.Error
}

func describe(msgs []jsonrpc.Message) []decoded {
	var out []decoded
	for _, m := range msgs {
		switch m := m.(type) {
		case *jsonrpc.Request:
			out = append(out, decoded{Request: true, ID: m.ID.Raw(), Method: m.Method, Params: string(m.Params)})
		case *jsonrpc.Response:
			d := decoded{ID: m.ID.Raw(), Result: string(m.Result)}
			if m.Error != nil {
				d.Error, _ = m.Error.(*jsonrpc.Error)
			}
			out = append(out, d)
		}
	}
	return out
}

// sdkDecodeLine decodes a line as the go-sdk's ioConn does (readBatch),
// through jsonrpc.DecodeMessage, for a line that holds one JSON value.
func sdkDecodeLine(line []byte) ([]jsonrpc.Message, error) {
	data := bytes.TrimSpace(line)
	if len(data) > 0 && data[0] == '[' && checkMaxDepth(data) == nil {
		var batch []json.RawMessage
		if json.Unmarshal(data, &batch) == nil {
			if len(batch) == 0 {
				return nil, errors.New("empty batch")
			}
			var msgs []jsonrpc.Message
			for _, raw := range batch {
				m, err := jsonrpc.DecodeMessage(raw)
				if err != nil {
					return nil, err
				}
				msgs = append(msgs, m)
			}
			return msgs, nil
		}
	}
	m, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, err
	}
	return []jsonrpc.Message{m}, nil
}

// compareWithSDK checks that decodeLine decodes line as the go-sdk does:
// the same messages, or an error for both (the same error where the
// go-sdk's is not a JSON parser's).
func compareWithSDK(t *testing.T, line []byte) {
	t.Helper()
	got, err := decodeLine(line)
	want, wantErr := sdkDecodeLine(line)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeLine(%q) error = %v; the go-sdk's = %v", line, err, wantErr)
	}
	if err != nil {
		if errors.Is(wantErr, errInvalidRequest) != errors.Is(err, errInvalidRequest) {
			t.Errorf("decodeLine(%q) error = %v; the go-sdk's = %v", line, err, wantErr)
		}
		return
	}
	if diff := cmp.Diff(describe(want), describe(got)); diff != "" {
		t.Errorf("decodeLine(%q) differs from the go-sdk (-sdk +ours):\n%s", line, diff)
	}
}

var decodeCases = []struct {
	name    string
	line    string
	want    []decoded // nil: an error, checked against the go-sdk's
	errText string    // the error's exact text, when set
}{
	{
		name: "request with a number id",
		line: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`,
		want: []decoded{{Request: true, ID: int64(7), Method: "tools/call", Params: `{"name":"echo"}`}},
	},
	{
		name: "request with a string id",
		line: `{"jsonrpc":"2.0","id":"a-1","method":"sampling/createMessage"}`,
		want: []decoded{{Request: true, ID: "a-1", Method: "sampling/createMessage"}},
	},
	{
		name: "notification",
		line: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
		want: []decoded{{Request: true, Method: "notifications/progress", Params: `{"progress":1}`}},
	},
	{
		name: "an empty method is still a request",
		line: `{"jsonrpc":"2.0","id":1,"method":""}`,
		want: []decoded{{Request: true, ID: int64(1)}},
	},
	{
		name: "response with a result",
		line: ` {"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}]}}` + "\r\n",
		want: []decoded{{ID: int64(3), Result: `{"content":[{"type":"text","text":"hi"}]}`}},
	},
	{
		name: "response with an error",
		line: `{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad","data":{"why":1}}}`,
		want: []decoded{{ID: "x", Error: &jsonrpc.Error{Code: -32602, Message: "bad", Data: json.RawMessage(`{"why":1}`)}}},
	},
	{
		name: "a null error is no error",
		line: `{"jsonrpc":"2.0","id":4,"result":{},"error":null}`,
		want: []decoded{{ID: int64(4), Result: `{}`}},
	},
	{
		name: "a float id is truncated as the go-sdk does",
		line: `{"jsonrpc":"2.0","id":2.0,"result":{}}`,
		want: []decoded{{ID: int64(2), Result: `{}`}},
	},
	{
		name:    "a response without an id",
		line:    `{"jsonrpc":"2.0","result":{}}`,
		errText: "invalid request",
	},
	{
		name:    "no method key: not a request",
		line:    `{"jsonrpc":"2.0","Method":"tools/call"}`,
		errText: "invalid request",
	},
	{
		name: "mixed-case keys are ignored",
		line: `{"jsonrpc":"2.0","ID":9,"id":1,"Result":{"a":1},"result":{}}`,
		want: []decoded{{ID: int64(1), Result: `{}`}},
	},
	{
		name:    "mixed-case version key",
		line:    `{"JSONRPC":"2.0","id":1,"result":{}}`,
		errText: `invalid message version tag ""; expected "2.0"`,
	},
	{
		name:    "wrong version",
		line:    `{"jsonrpc":"1.0","id":1,"result":{}}`,
		errText: `invalid message version tag "1.0"; expected "2.0"`,
	},
	{name: "an object id", line: `{"jsonrpc":"2.0","id":{},"result":{}}`},
	{name: "a method that is not a string", line: `{"jsonrpc":"2.0","id":1,"method":5}`},
	{name: "not an object", line: `"hello"`},
	{name: "not JSON", line: `{"jsonrpc":"2.0",`},
	{
		name:    "nesting of 1001 refused",
		line:    `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`,
		errText: "unmarshaling jsonrpc message: json: exceeded maximum nesting depth of 1000",
	},
	{
		name: "nesting of 1000 accepted",
		line: `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
		want: []decoded{{ID: int64(1), Result: strings.Repeat("[", 999) + strings.Repeat("]", 999)}},
	},
	{
		name: "brackets in strings do not nest",
		line: `{"jsonrpc":"2.0","id":1,"result":{"s":"` + strings.Repeat("[", 1001) + `\"{"}}`,
		want: []decoded{{ID: int64(1), Result: `{"s":"` + strings.Repeat("[", 1001) + `\"{"}`}},
	},
	{
		name: "batch",
		line: `[{"jsonrpc":"2.0","method":"notifications/message"}, {"jsonrpc":"2.0","id":5,"result":{}}]`,
		want: []decoded{{Request: true, Method: "notifications/message"}, {ID: int64(5), Result: `{}`}},
	},
	{name: "empty batch", line: `[]`, errText: "empty batch"},
	{name: "a batch with a bad message", line: `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"1.0"}]`},
	{name: "a batch of one too deep", line: `[{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}]`},
}

func TestDecodeLine(t *testing.T) {
	t.Parallel()
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			compareWithSDK(t, []byte(tc.line))
			got, err := decodeLine([]byte(tc.line))
			if tc.want == nil {
				if err == nil {
					t.Fatalf("decodeLine = %v; want an error", describe(got))
				}
				if tc.errText != "" && err.Error() != tc.errText {
					t.Errorf("error = %q; want %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("decodeLine: %v", err)
			}
			if diff := cmp.Diff(tc.want, describe(got)); diff != "" {
				t.Errorf("messages differ (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeLineBlank(t *testing.T) {
	t.Parallel()
	for _, line := range []string{"", "\n", " \t\r\n"} {
		if msgs, err := decodeLine([]byte(line)); msgs != nil || err != nil {
			t.Errorf("decodeLine(%q) = %v, %v; want nothing", line, msgs, err)
		}
	}
}

// The decoded messages keep none of the line's bytes, which the next read
// reuses.
func TestDecodeLineCopies(t *testing.T) {
	t.Parallel()
	line := []byte(`[{"jsonrpc":"2.0","id":"s","method":"m","params":{"p":1}},{"jsonrpc":"2.0","id":2,"result":{"r":2},"error":{"code":1,"message":"e","data":[3]}}]`)
	msgs, err := decodeLine(line)
	if err != nil {
		t.Fatal(err)
	}
	want := describe(msgs)
	for i := range line {
		line[i] = 'x'
	}
	if diff := cmp.Diff(want, describe(msgs)); diff != "" {
		t.Errorf("messages changed with the line (-before +after):\n%s", diff)
	}
}

// FuzzDecodeLine checks decodeLine against the go-sdk on any line: the
// go-sdk's framing hands jsonrpc.DecodeMessage one JSON value; a line that
// is not one ends the session there as here.
func FuzzDecodeLine(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add([]byte(tc.line))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}} {"jsonrpc":"2.0","id":2,"result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"method":null}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1e400,"result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"\u00e9\ud83d\ude00","method":"\u0000"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"Code":1,"Message":"m"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(bytes.Trim(line, " \t\r\n")) == 0 {
			return
		}
		if !json.Valid(line) {
			if msgs, err := decodeLine(line); err == nil {
				t.Fatalf("decodeLine(%q) = %v; want an error for a line that is not one JSON value", line, describe(msgs))
			}
			return
		}
		compareWithSDK(t, line)
	})
}

// pipeConn is a lineConn over pipes, as dialStdio makes one: the test
// writes the server's stdout and reads its stdin.
type pipeConn struct {
	conn        mcp.Connection
	stdout      *io.PipeWriter // the server's end
	stdin       *io.PipeReader // the server's end
	stdoutLines *jsonLines
}

func newPipeConn(t *testing.T, max int) *pipeConn {
	t.Helper()
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	lines := newJSONLines(outR, max, nil)
	conn, err := lineTransport{stdout: lines, stdin: inW}.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		_ = inR.Close()
		_ = outW.Close() // ends the reader, as closing the process's stdout does
	})
	return &pipeConn{conn: conn, stdout: outW, stdin: inR, stdoutLines: lines}
}

// readAll reads messages until the first error.
func readAll(ctx context.Context, conn mcp.Connection) ([]jsonrpc.Message, error) {
	var msgs []jsonrpc.Message
	for {
		m, err := conn.Read(ctx)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

// sdkRead reads stdout through the go-sdk's IOTransport, as dialStdio did.
func sdkRead(ctx context.Context, stdout string) ([]jsonrpc.Message, error) {
	lines := &lineReader{j: newJSONLines(strings.NewReader(stdout), 0, nil)}
	conn, err := (&mcp.IOTransport{Reader: io.NopCloser(lines), Writer: nopWriteCloser{io.Discard}}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return readAll(ctx, conn)
}

// lineReader streams the kept lines of j as bytes, then the error that
// ended them: what dialStdio handed the go-sdk before lineConn.
type lineReader struct {
	j       *jsonLines
	pending []byte
}

func (r *lineReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		line, err := r.j.next()
		if len(line) == 0 {
			return 0, err
		}
		r.pending = line
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// TestLineConnReadsAsTheSDK reads the same stdout through lineConn and
// through the go-sdk's IOTransport: the same messages, then an error of
// the same kind (the stream's end, or a malformed message).
func TestLineConnReadsAsTheSDK(t *testing.T) {
	t.Parallel()
	const (
		resp  = `{"jsonrpc":"2.0","id":1,"result":{}}`
		notif = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}`
	)
	long := `{"jsonrpc":"2.0","id":2,"result":{"pad":"` + strings.Repeat("a", 300<<10) + `"}}`
	tests := []struct {
		name   string
		stdout string
	}{
		{"messages, banners and blank lines", "server v1\n" + resp + "\n\n" + notif + "\r\n  \n[INFO] up\n"},
		{"a batch", "[" + notif + "," + resp + "]\n" + long + "\n"},
		{"a message longer than the read buffer", long + "\n" + resp + "\n"},
		{"a last message without a newline", resp + "\n" + notif},
		{"the stream ends inside a message", resp + "\n" + `{"jsonrpc":"2.0","id":3,"res`},
		{"the stream ends inside a long message", long[:100<<10]},
		{"a wrong version", resp + "\n" + `{"jsonrpc":"1.0","id":1,"result":{}}` + "\n" + notif + "\n"},
		{"two messages on a line", resp + " " + notif + "\n"},
		{"a response without an id", `{"jsonrpc":"2.0","result":{}}` + "\n"},
		{"an empty batch", "[]\n" + resp + "\n"},
		{"a line that is not JSON", `{"jsonrpc":"2.0",oops}` + "\n" + resp + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, wantErr := sdkRead(t.Context(), tc.stdout)

			pc := newPipeConn(t, 0)
			go func() {
				_, _ = io.Copy(pc.stdout, iotest.HalfReader(strings.NewReader(tc.stdout)))
				_ = pc.stdout.Close()
			}()
			got, err := readAll(t.Context(), pc.conn)

			if diff := cmp.Diff(describe(want), describe(got)); diff != "" {
				t.Errorf("messages differ from the go-sdk's (-sdk +ours):\n%s", diff)
			}
			if kind(err) != kind(wantErr) {
				t.Errorf("error = %v (%s); the go-sdk's = %v (%s)", err, kind(err), wantErr, kind(wantErr))
			}
		})
	}
}

// kind names how a read ended, as classify tells ends apart.
func kind(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return "end"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "end inside a message"
	case err == nil:
		return "none"
	case ended(err):
		return "other end"
	default:
		return "malformed"
	}
}

// A message over the limit ends the reading with errMessageTooLarge, which
// classify names.
func TestLineConnTooLarge(t *testing.T) {
	t.Parallel()
	pc := newPipeConn(t, 1000)
	go func() {
		_, _ = io.WriteString(pc.stdout, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"result":{"pad":"`+strings.Repeat("a", 100<<10)+`"}}`+"\n")
		_ = pc.stdout.Close()
	}()
	got, err := readAll(t.Context(), pc.conn)
	if len(got) != 1 || !errors.Is(err, errMessageTooLarge) || !pc.stdoutLines.overflowed() {
		t.Fatalf("read %d messages, then %v (overflowed %v); want 1, then errMessageTooLarge", len(got), err, pc.stdoutLines.overflowed())
	}
}

// A read error of the pipe ends the reading with it.
func TestLineConnReadError(t *testing.T) {
	t.Parallel()
	pc := newPipeConn(t, 0)
	errBroken := errors.New("broken pipe")
	go func() {
		_, _ = io.WriteString(pc.stdout, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"+`{"jsonrpc":`)
		_ = pc.stdout.CloseWithError(errBroken)
	}()
	got, err := readAll(t.Context(), pc.conn)
	if len(got) != 1 || !errors.Is(err, errBroken) {
		t.Fatalf("read %d messages, then %v; want 1, then %v", len(got), err, errBroken)
	}
}

// Read returns when its context ends, and when the connection closes.
func TestLineConnReadUnblocks(t *testing.T) {
	t.Parallel()
	pc := newPipeConn(t, 0)
	ctx, cancel := context.WithCancel(t.Context())
	errs := make(chan error)
	go func() {
		_, err := pc.conn.Read(ctx)
		errs <- err
	}()
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel = %v; want context.Canceled", err)
	}

	go func() {
		_, err := pc.conn.Read(t.Context())
		errs <- err
	}()
	if err := pc.conn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errs; !errors.Is(err, io.EOF) {
		t.Errorf("Read after Close = %v; want io.EOF", err)
	}
	if _, err := pc.conn.Read(t.Context()); !errors.Is(err, io.EOF) {
		t.Errorf("Read on a closed connection = %v; want io.EOF", err)
	}
}

// Close closes the server's stdin once, and the reader ends once the
// server's stdout closes even if a message is waiting for Read.
func TestLineConnClose(t *testing.T) {
	t.Parallel()
	inR, inW := io.Pipe()
	closes := &countingCloser{WriteCloser: inW}
	outR, outW := io.Pipe()
	conn, err := lineTransport{stdout: newJSONLines(outR, 0, nil), stdin: closes}.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		_, _ = io.WriteString(outW, `{"jsonrpc":"2.0","method":"m"}`+"\n")
		close(wrote)
	}()
	<-wrote // the reader holds the message, which nobody reads
	for range 2 {
		if err := conn.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if closes.n != 1 {
		t.Errorf("stdin closed %d times; want 1", closes.n)
	}
	if _, err := inR.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the server's stdin read %v after Close; want io.EOF", err)
	}
	if err := conn.Write(t.Context(), &jsonrpc.Request{Method: "m"}); err == nil {
		t.Error("Write after Close succeeded")
	}
	_ = outW.Close() // goleak in TestMain checks that the reader ended
}

type countingCloser struct {
	io.WriteCloser
	mu sync.Mutex
	n  int
}

func (c *countingCloser) Close() error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.WriteCloser.Close()
}

// Writes are whole lines, one message each, even when concurrent.
func TestLineConnWrite(t *testing.T) {
	t.Parallel()
	pc := newPipeConn(t, 0)
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id, _ := jsonrpc.MakeID(fmt.Sprintf("w%d-%d", w, i))
				params := json.RawMessage(`{"pad":"` + strings.Repeat("p", 10<<10) + `"}`)
				if err := pc.conn.Write(t.Context(), &jsonrpc.Request{ID: id, Method: "m", Params: params}); err != nil {
					t.Errorf("Write: %v", err)
				}
			}
		})
	}
	server := newJSONLines(pc.stdin, 0, nil)
	seen := make(map[any]bool)
	for range writers * each {
		line, err := server.next()
		if err != nil {
			t.Fatalf("the server read %v", err)
		}
		want, err := jsonrpc.DecodeMessage(line)
		if err != nil || line[len(line)-1] != '\n' {
			t.Fatalf("the server read %q: %v", line[:min(len(line), 80)], err)
		}
		seen[want.(*jsonrpc.Request).ID.Raw()] = true
	}
	wg.Wait()
	if len(seen) != writers*each {
		t.Errorf("the server read %d distinct messages; want %d", len(seen), writers*each)
	}
	if err := pc.conn.Write(canceled(t), &jsonrpc.Request{Method: "m"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context = %v; want context.Canceled", err)
	}
}

func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}
