package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync"
	"time"
)

// sqliteConnector opens an SQLite store's connections through the driver
// and counts them, so that Close can wait until SQLite has closed the
// file. database/sql closes a connection that is in use when DB.Close
// runs only once it is given back, and one its opener goroutine is still
// making (after the driver discarded one, as it does with a connection
// whose statement was interrupted) once that is made: both after DB.Close
// has returned, and the last one's close writes the WAL back.
type sqliteConnector struct {
	driver driver.Driver
	dsn    string

	mu      sync.Mutex
	open    int           // connections open, or being opened
	drained chan struct{} // closed when open comes to zero; nil unless waited for
}

// sqliteConn is what database/sql uses of the driver's connections; the
// count keeps each of them.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// countedConn is a connection the connector counts until it is closed.
type countedConn struct {
	sqliteConn
	once   sync.Once
	closed func()
}

func (c *countedConn) Close() error {
	err := c.sqliteConn.Close()
	c.once.Do(c.closed)
	return err
}

func (c *sqliteConnector) Driver() driver.Driver { return c.driver }

func (c *sqliteConnector) Connect(context.Context) (driver.Conn, error) {
	c.mu.Lock()
	c.open++
	c.mu.Unlock()
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		c.gone()
		return nil, err
	}
	sc, ok := conn.(sqliteConn)
	if !ok {
		_ = conn.Close()
		c.gone()
		return nil, errors.New("the SQLite driver's connections lack a method agentd uses")
	}
	return &countedConn{sqliteConn: sc, closed: c.gone}, nil
}

// gone counts a connection closed, or one that failed to open.
func (c *sqliteConnector) gone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open--
	if c.open == 0 && c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
}

// wait waits up to d for every connection to be closed, and says whether
// they were.
func (c *sqliteConnector) wait(d time.Duration) bool {
	c.mu.Lock()
	if c.open == 0 {
		c.mu.Unlock()
		return true
	}
	if c.drained == nil {
		c.drained = make(chan struct{})
	}
	drained := c.drained
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-drained:
		return true
	case <-t.C:
		return false
	}
}
