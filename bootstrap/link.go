// This file holds link, one TCP connection carrying frames: serialised
// writes (with a liveness deadline on control links), refusals, the
// goodbye of a clean close, and the reader that keeps the liveness
// deadline moving.

package bootstrap

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// byeTimeout bounds the write of a goodbye frame.
const byeTimeout = 2 * time.Second

// errWriteClosed: the link's write side was shut (goodbye sent or
// received).
var errWriteClosed = errors.New("connection closed for writing")

// link is one TCP connection to a peer.
type link struct {
	conn net.Conn
	peer int
	r    *bufio.Reader
	idle time.Duration // liveness bound of reads and writes; 0 on data links

	wmu     sync.Mutex
	wclosed bool // guarded by wmu: the write side is shut

	byeIn atomic.Bool   // the peer said goodbye on this link
	dead  atomic.Bool   // this side closed the link on purpose
	done  chan struct{} // closed when the link's reader returns
}

// newLink wraps an established connection.
func newLink(c net.Conn, peer int, idle time.Duration) *link {
	l := &link{conn: c, peer: peer, idle: idle, done: make(chan struct{})}
	l.r = bufio.NewReaderSize(idleReader{c, idle}, readBuffer)
	return l
}

// idleReader moves the read deadline before every read, so a read fails
// only after idle without any byte.
type idleReader struct {
	c    net.Conn
	idle time.Duration
}

// Read reads from the connection, idle at most r.idle.
func (r idleReader) Read(p []byte) (int, error) {
	if r.idle > 0 {
		if err := r.c.SetReadDeadline(time.Now().Add(r.idle)); err != nil {
			return 0, err
		}
	}
	return r.c.Read(p)
}

// send writes one frame within the link's liveness bound.
func (l *link) send(h header, p []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.wclosed {
		return errWriteClosed
	}
	_, err := writeFrame(l.conn, h, p, l.idle)
	return err
}

// shutWrite shuts the write side, after a goodbye frame if bye.
func (l *link) shutWrite(bye bool) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.wclosed {
		return
	}
	l.wclosed = true
	if bye {
		l.conn.SetWriteDeadline(time.Now().Add(byeTimeout))
		writeFrame(l.conn, header{kind: kindBye}, nil, 0)
	}
	if tc, ok := l.conn.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	} else {
		l.conn.Close()
	}
}

// refuse sends a refusal (a fail frame) instead of any further frame,
// reads and drops what the peer still sends until it closes (so that the
// refusal is not lost to a reset), then closes.
func (l *link) refuse(msg string) {
	l.dead.Store(true)
	l.wmu.Lock()
	if !l.wclosed {
		l.wclosed = true
		l.wmu.Unlock()
		refuseConn(l.conn, msg)
		return
	}
	l.wmu.Unlock()
	l.conn.Close()
}

// refuseConn writes a fail frame carrying msg, shuts the write side,
// drains the connection for a short while and closes it.
func refuseConn(c net.Conn, msg string) { refuseConnArg(c, msg, 0) }

// refuseConnArg is refuseConn with arg in the fail frame's header
// (failAuth: the peer did not prove the job's secret).
func refuseConnArg(c net.Conn, msg string, arg uint32) {
	c.SetWriteDeadline(time.Now().Add(byeTimeout))
	writeFrame(c, header{kind: kindFail, arg: arg}, []byte(msg), 0)
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(byeTimeout))
	io.Copy(io.Discard, c)
	c.Close()
}

// kill closes the connection on purpose: its reader will not report the
// peer lost.
func (l *link) kill() {
	l.dead.Store(true)
	l.conn.Close()
}

// closeGracefully says goodbye, waits up to grace for the peer to close
// its side (so that nothing is left unread, which would reset the
// connection), then closes.
func (l *link) closeGracefully(grace time.Duration) {
	l.dead.Store(true)
	said := make(chan struct{})
	go func() {
		l.shutWrite(true)
		close(said)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
	l.conn.Close()
	<-said
}
