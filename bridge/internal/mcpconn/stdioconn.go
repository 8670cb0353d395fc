package mcpconn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// lineTransport is a stdio server's MCP transport: newline-delimited
// JSON-RPC, read from the server's filtered stdout and written to its
// stdin. It frames messages as the go-sdk's IOTransport does, and decodes
// them as the go-sdk does, but without a decoder per message: the go-sdk's
// ioConn decodes each message through a fresh JSON decoder whose 32 KiB
// buffer was most of the bytes a tools/call allocated.
type lineTransport struct {
	stdout *jsonLines
	stdin  io.WriteCloser
}

// Connect starts the connection's reader. A stdio server serves one
// session, so it is called once.
func (t lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{stdin: t.stdin, incoming: make(chan lineMessage), closed: make(chan struct{})}
	go c.readLines(t.stdout)
	return c, nil
}

// lineConn is a lineTransport's connection. Read is called by one
// goroutine at a time; Write and Close may be called concurrently with
// anything. Like the go-sdk's ioConn, Close closes the server's stdin but
// not its stdout, which the process owns (process.close): the reader ends
// when the process's stdout is closed or reaches its end.
type lineConn struct {
	stdin   io.WriteCloser
	writeMu sync.Mutex // one message written at a time, whole

	incoming  chan lineMessage // from readLines
	closed    chan struct{}    // closed by Close
	closeOnce sync.Once
	closeErr  error
}

// lineMessage is a message read, or the error that ended the reading.
type lineMessage struct {
	msg jsonrpc.Message
	err error
}

// readLines decodes the lines of stdout and hands their messages to Read,
// until the stream ends, a line does not decode, or the connection closes.
// A message decodes before the next line is read, since the line's bytes
// are then reused.
func (c *lineConn) readLines(stdout *jsonLines) {
	for {
		line, readErr := stdout.next()
		msgs, err := decodeLine(line)
		err = cutShort(line, err, readErr)
		if err == nil {
			for _, m := range msgs {
				if !c.hand(lineMessage{msg: m}) {
					return
				}
			}
			err = readErr
		}
		if err != nil {
			c.hand(lineMessage{err: err})
			return
		}
	}
}

// cutShort is the error of a line that did not decode (decodeErr): the
// stream's own (readErr; an unexpected EOF for a clean end) when the
// stream ended inside the message, which is not valid JSON.
func cutShort(line []byte, decodeErr, readErr error) error {
	if decodeErr == nil || readErr == nil || segjson.Valid(line) {
		return decodeErr
	}
	if errors.Is(readErr, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return readErr
}

// hand gives m to Read; false if the connection closed first.
func (c *lineConn) hand(m lineMessage) bool {
	select {
	case c.incoming <- m:
		return true
	case <-c.closed:
		return false
	}
}

// Read returns the next message; it returns early with ctx's error, or
// with io.EOF once the connection is closed. After the error that ended
// the reading it waits for ctx or Close.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m.msg, m.err
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write writes msg and its newline to the server's stdin in one write.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %w", err)
	}
	data = append(data, '\n')
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err = c.stdin.Write(data)
	return err
}

// Close closes the server's stdin and ends Read. Idempotent.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.stdin.Close()
		close(c.closed)
	})
	return c.closeErr
}

// SessionID is "": stdio has no session id.
func (c *lineConn) SessionID() string { return "" }

// decodeLine decodes a line of a server's stdout as the go-sdk's ioConn
// decodes a frame: a JSON-RPC message, or a batch of them (an array, which
// servers of protocol versions before 2025-06-18 may send). A blank line
// holds none. The messages do not share the line's bytes.
//
// A batch's messages are handed on one by one, and, unlike the go-sdk,
// the client answers a batch's requests (sampling, elicitation) one by one
// too, where JSON-RPC asks for one array of answers (a SHOULD): batches
// left MCP in 2025-06-18, and servers send such requests singly.
func decodeLine(line []byte) ([]jsonrpc.Message, error) {
	data := bytes.Trim(line, " \t\r\n")
	if len(data) == 0 {
		return nil, nil
	}
	if err := checkMaxDepth(data); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if data[0] == '[' {
		// Elements share the line's bytes only until they are decoded.
		var batch []json.RawMessage
		if parseAll(data, &batch, segjson.DontCopyRawMessage) == nil {
			return decodeBatch(batch)
		}
	}
	m, err := decodeMessage(data)
	if err != nil {
		return nil, err
	}
	return []jsonrpc.Message{m}, nil
}

// decodeBatch decodes the messages of a batch, which holds at least one.
func decodeBatch(batch []json.RawMessage) ([]jsonrpc.Message, error) {
	if len(batch) == 0 {
		return nil, errors.New("empty batch")
	}
	msgs := make([]jsonrpc.Message, len(batch))
	for i, raw := range batch {
		m, err := decodeMessage(raw)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return msgs, nil
}

// wireMessage is the go-sdk's decoding form of a JSON-RPC message
// (jsonrpc2.wireDecode). Method is raw so that a "method" key, even with
// the value "", makes a request.
type wireMessage struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// errInvalidRequest is the go-sdk's jsonrpc2.ErrInvalidRequest: errors.Is
// matches JSON-RPC errors by code.
var errInvalidRequest = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}

// decodeMessage decodes one JSON-RPC message as jsonrpc.DecodeMessage
// does, with the same errors, from data that holds one JSON value.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if err := parseAll(data, &w, 0); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.VersionTag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.VersionTag, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 {
		var method string
		if err := parseAll(w.Method, &method, 0); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil { // not a typed nil in the error interface
		resp.Error = w.Error
	}
	return resp, nil
}

// parseAll decodes data, one JSON value and nothing after it, into v,
// matching object keys to struct fields exactly, as the go-sdk does.
func parseAll(data []byte, v any, flags segjson.ParseFlags) error {
	rest, err := segjson.Parse(data, v, flags|segjson.DontMatchCaseInsensitiveStructFields)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("invalid trailing data after the message: %q", rest[:min(len(rest), 16)])
	}
	return err
}

// maxDepth is the go-sdk's limit on a message's nesting depth.
const maxDepth = 1000

var errMaxDepth = fmt.Errorf("json: exceeded maximum nesting depth of %d", maxDepth)

// checkMaxDepth refuses data nested deeper than maxDepth, counting
// brackets outside strings exactly as the go-sdk does (internal/json).
func checkMaxDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return errMaxDepth
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
