package sharedport

import (
	"io"
	"net"

	"golang.org/x/net/http2"
)

// settingsAckListener hands the HTTP server its connections without the
// acknowledgements of the SETTINGS that the gRPC matchers sent. Each
// matcher sends them to every HTTP/2 connection it reads, since gRPC
// clients wait for them before their first request; the client
// acknowledges them, and Go's HTTP/2 server ends a connection that
// acknowledges more SETTINGS than it sent itself.
type settingsAckListener struct{ net.Listener }

func (l settingsAckListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &ackFilter{Conn: c}, nil
}

// frameHeaderLen is the length of an HTTP/2 frame's header, and
// initialMaxFrameSize the largest payload a peer may send before it
// learns that the other allows more (RFC 9113, 6.5.2).
const (
	frameHeaderLen      = 9
	initialMaxFrameSize = 16384
)

// ackFilter reads its connection as it is, except that an HTTP/2
// connection's first len(grpcMatchers) SETTINGS acknowledgements are left
// out. It parses the connection's frames only until then: from the
// client, SETTINGS come first and the acknowledgements within its first
// round trip.
type ackFilter struct {
	net.Conn
	started bool   // the preface has been looked at
	dropped int    // acknowledgements left out
	through bool   // every one was dropped, or the connection is not HTTP/2
	pending []byte // read from Conn, not yet returned
}

// NetConn is the connection filtered.
func (c *ackFilter) NetConn() net.Conn { return c.Conn }

func (c *ackFilter) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.through {
			return c.Conn.Read(p)
		}
		if err := c.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// next reads the preface, or the next frame, into pending, unless it is
// an acknowledgement to leave out.
func (c *ackFilter) next() error {
	if !c.started {
		c.started = true
		return c.preface()
	}
	frame := make([]byte, frameHeaderLen, frameHeaderLen+initialMaxFrameSize)
	if _, err := io.ReadFull(c.Conn, frame); err != nil {
		return err
	}
	length := int(frame[0])<<16 | int(frame[1])<<8 | int(frame[2])
	switch {
	case length == 0 && http2.FrameType(frame[3]) == http2.FrameSettings && http2.Flags(frame[4]).Has(http2.FlagSettingsAck):
		c.dropped++
		c.through = c.dropped == len(grpcMatchers)
		return nil
	case length > initialMaxFrameSize:
		// Larger than a client may send before it has the server's
		// SETTINGS: the server refuses it; it is not buffered here.
		c.through = true
		c.pending = frame
		return nil
	}
	frame = frame[:frameHeaderLen+length]
	if _, err := io.ReadFull(c.Conn, frame[frameHeaderLen:]); err != nil {
		return err
	}
	c.pending = frame
	return nil
}

// preface reads the client's preface into pending, a byte at a time
// until it differs from HTTP/2's: an HTTP/1 request may be shorter than
// the preface, and its client waits for the answer.
func (c *ackFilter) preface() error {
	buf := make([]byte, 0, len(http2.ClientPreface))
	var b [1]byte
	for len(buf) < len(http2.ClientPreface) {
		if _, err := io.ReadFull(c.Conn, b[:]); err != nil {
			c.pending = buf
			c.through = true
			if len(buf) > 0 {
				return nil
			}
			return err
		}
		buf = append(buf, b[0])
		if b[0] != http2.ClientPreface[len(buf)-1] {
			c.through = true
			break
		}
	}
	c.pending = buf
	return nil
}
