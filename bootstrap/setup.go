// This file holds the set-up: rank 0 listening, publishing its address
// (rendezvous file), accepting every rank's hello and sending the rank
// table; the other ranks finding rank 0, retrying with backoff, and
// joining; and the accept loop that serves peer connections afterwards.

package bootstrap

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mscclgo/mscclgo/internal/infile"
)

// joined is a connection handed from the accept loop to rank 0's set-up:
// a hello, or (err set) a connection refused for speaking garbage.
type joined struct {
	conn   net.Conn
	hello  hello
	remote string
	nonces []byte // the rank's challenge, then rank 0's: what the table's proof covers
	err    error
}

// fatalError marks a join error that retrying cannot fix.
type fatalError struct{ err error }

// Error returns the wrapped error's message.
func (e *fatalError) Error() string { return e.err.Error() }

// setupRoot is rank 0's set-up.
func (b *Bootstrap) setupRoot(ctx context.Context, w World, self Peer) error {
	start := time.Now()
	if b.keyFile != "" {
		key := make([]byte, secretSize)
		if _, err := rand.Read(key); err != nil {
			return b.errorf("making the job secret", err)
		}
		if err := writeSecret(b.keyFile, key); err != nil {
			return b.errorf("publishing the job secret in "+b.keyFile, err)
		}
		b.key, b.ownKeyFile = key, true
	}
	ln := b.opts.Listener
	advertise := w.Master
	if ln == nil {
		var err error
		if w.Master != "" {
			// The address the ranks are told, resolved: rank 0 listens
			// on that interface only.
			host, port, _ := net.SplitHostPort(w.Master)
			ln, err = listenAt(ctx, host, port)
			if err != nil {
				return b.errorf("listening for ranks at "+w.Master, err)
			}
		} else {
			host := w.RendezvousHost
			if host == "" {
				host = firstIPv4()
			}
			advertise = net.JoinHostPort(host, "0")
			if ln, err = net.Listen("tcp", advertise); err != nil {
				return b.errorf("listening for ranks at "+advertise, shortNetErr(err))
			}
			advertise = ln.Addr().String()
		}
	}
	b.ln = ln
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if w.Master == "" && w.RendezvousFile != "" {
		if err := writeRendezvous(w.RendezvousFile, advertise); err != nil {
			return b.errorf("publishing rank 0's address", err)
		}
		b.rdzvFile = w.RendezvousFile
	}
	self.Addr = advertise
	b.joinCh = make(chan joined)
	b.setupOver = make(chan struct{})
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.acceptLoop()
	}()
	err := b.gatherRanks(ctx, self, start)
	b.mu.Lock()
	b.setupErr = err
	b.mu.Unlock()
	close(b.setupOver)
	return err
}

// gatherRanks waits for every rank's hello, then sends each the table.
func (b *Bootstrap) gatherRanks(ctx context.Context, self Peer, start time.Time) error {
	hellos := make([]hello, b.size)
	conns := make([]net.Conn, b.size)
	nonces := make([][]byte, b.size)
	from := make([]string, b.size)
	missing := b.size - 1
	var rejected []string
	// fail refuses every rank that joined, telling it why (remote: the
	// message in their words), and returns rank 0's error.
	fail := func(step string, err error, remote string) error {
		for _, c := range conns {
			if c != nil {
				refuseConn(c, "rank 0 failed the set-up: "+step+": "+remote)
			}
		}
		return b.errorf(step, err)
	}
	for missing > 0 {
		select {
		case j := <-b.joinCh:
			if j.err != nil {
				rejected = append(rejected, j.err.Error())
				continue
			}
			h, r := j.hello, int(j.hello.rank)
			var local, remote string
			switch {
			case int(h.size) != b.size:
				local = fmt.Sprintf("rank %d reported world size %d, this rank has %d", r, h.size, b.size)
				remote = fmt.Sprintf("rank %d reported world size %d, rank 0 has %d", r, h.size, b.size)
			case r == 0 || r >= b.size:
				local = fmt.Sprintf("a process at %s reported rank %d, outside 1..%d", j.remote, r, b.size-1)
			case conns[r] != nil:
				local = fmt.Sprintf("rank %d joined twice (from %s and from %s)", r, from[r], j.remote)
			}
			if local != "" {
				if remote == "" {
					remote = local
				}
				refuseConn(j.conn, remote)
				err := fail("handshake", errors.New(local), remote)
				b.refuseLatecomers(ctx, conns, r, "rank 0 failed the set-up: handshake: "+remote)
				return err
			}
			conns[r], hellos[r], from[r], nonces[r] = j.conn, h, j.remote, j.nonces
			missing--
		case <-ctx.Done():
			var miss []int
			for r := 1; r < b.size; r++ {
				if conns[r] == nil {
					miss = append(miss, r)
				}
			}
			note := ""
			if len(rejected) > 0 {
				note = fmt.Sprintf(" (refused %d connection(s) that did not speak this protocol or prove the job's secret, first: %s)", len(rejected), rejected[0])
			}
			err := fmt.Errorf("%w after %s%s", context.Cause(ctx), since(start), note)
			return fail(fmt.Sprintf("waiting for %s to join at %s", rankList(miss), self.Addr), err, err.Error())
		}
	}

	peers := make([]Peer, b.size)
	peers[0] = self
	for r := 1; r < b.size; r++ {
		h := hellos[r]
		peers[r] = Peer{Rank: r, Host: h.host, Addr: h.addr, LocalRank: int(h.localRank), LocalSize: int(h.localSize)}
	}
	var session uint64
	for session == 0 {
		var r [8]byte
		if _, err := rand.Read(r[:]); err != nil {
			return fail("making the session", err, "rank 0 could not make the session")
		}
		session = binary.BigEndian.Uint64(r[:])
	}
	b.mu.Lock()
	b.session = session
	b.mu.Unlock()
	b.peers = peers
	table := encodeTable(session, peers)
	for r := 1; r < b.size; r++ {
		l := newLink(conns[r], r, b.opts.HeartbeatTimeout)
		b.ctrl[r] = l
		// A failed write is a rank that died meanwhile: its control
		// reader reports it lost once started.
		// The proof binds the table to this rank's challenge: only the
		// holder of the job's secret can send it.
		proof := prove(b.key, labelTable, nonces[r], table)
		if err := l.send(header{kind: kindTable}, append(slices.Clip(table), proof...)); err != nil {
			b.logf("sending the rank table to rank %d: %v", r, err)
		}
	}
	b.removeRendezvous()
	b.rdzvFile, b.ownKeyFile = "", false
	return nil
}

// refuseLatecomers answers the ranks that had not joined when the
// set-up failed with the failure, so that they end with its reason
// instead of waiting for rank 0 until their own timeout. It returns once
// every rank has been answered, or after failGrace, or when ctx ends.
func (b *Bootstrap) refuseLatecomers(ctx context.Context, conns []net.Conn, offender int, msg string) {
	answered := map[int]bool{0: true}
	for r, c := range conns {
		if c != nil {
			answered[r] = true
		}
	}
	if offender > 0 && offender < b.size {
		answered[offender] = true
	}
	grace := time.NewTimer(failGrace)
	defer grace.Stop()
	for len(answered) < b.size {
		select {
		case j := <-b.joinCh:
			if j.err == nil {
				refuseConn(j.conn, msg)
				answered[int(j.hello.rank)] = true
			}
		case <-grace.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// failGrace bounds how long a failed set-up keeps answering latecomers.
const failGrace = 10 * time.Second

// setupJoin is the set-up of a rank other than 0: find rank 0 and join,
// retrying with backoff until the deadline.
func (b *Bootstrap) setupJoin(ctx context.Context, w World, self Peer) error {
	start := time.Now()
	backoff := 20 * time.Millisecond
	where := "rank 0 at " + w.Master
	if w.Master == "" {
		where = "rank 0's address in " + w.RendezvousFile
	}
	var lastErr error
	for {
		addr := w.Master
		if addr == "" {
			a, err := readRendezvous(w.RendezvousFile)
			if errors.Is(err, infile.ErrNotRegular) || errors.Is(err, infile.ErrTooLarge) || errors.Is(err, infile.ErrLinkLoop) {
				// Rank 0 writes a regular file of one line: this
				// is not its file, and waiting would not change it.
				return b.errorf("reading the rendezvous file", err)
			}
			if err != nil {
				lastErr = err
			} else {
				addr, where = a, "rank 0 at "+a
			}
		}
		key := b.key
		if addr != "" && b.keyFile != "" {
			// Read at every attempt: rank 0 may have replaced a
			// stale secret of an earlier job since.
			k, err := readSecret(b.keyFile)
			var pe *permError
			if errors.As(err, &pe) {
				return b.errorf("reading the job secret", err)
			}
			if err != nil {
				lastErr, addr = err, ""
			}
			key = k
		}
		if addr != "" {
			err := b.tryJoin(ctx, addr, key, self, start)
			if err == nil {
				return nil
			}
			var fe *fatalError
			if errors.As(err, &fe) {
				return fe.err
			}
			lastErr = shortNetErr(err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return b.errorf("waiting for "+where, fmt.Errorf("%w after %s", lastErr, since(start)))
		}
		backoff = min(2*backoff, time.Second)
	}
}

// tryJoin connects to rank 0 at addr once, proves the job's secret key
// and has rank 0 prove it, sends the hello and reads the table. Errors
// that retrying cannot fix come back as *fatalError; so does a failed
// proof, unless the secret came from a file (which rank 0 may rewrite).
func (b *Bootstrap) tryJoin(ctx context.Context, addr string, key []byte, self Peer, start time.Time) error {
	d := net.Dialer{KeepAlive: 15 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	fatal := func(step string, err error) error {
		c.Close()
		return &fatalError{b.errorf(step, err)}
	}
	unproven := func(err error) error {
		if b.keyFile == "" {
			return fatal("handshake with rank 0 at "+addr, err)
		}
		c.Close()
		return err
	}
	if b.ln == nil && b.opts.Listener != nil {
		b.ln = b.opts.Listener
	}
	if b.ln == nil {
		host := b.opts.ListenHost
		if host == "" {
			host, _, _ = net.SplitHostPort(c.LocalAddr().String())
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return fatal("listening for peers on "+host, shortNetErr(err))
		}
		b.ln = ln
	}
	self.Addr = b.ln.Addr().String()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.SetDeadline(b.deadline)
	// read reads rank 0's next frame, naming what it waited for.
	read := func(what string, max uint64) (header, []byte, error) {
		h, p, err := readFrame(c, max)
		switch {
		case err == nil:
			if h.kind == kindFail {
				if h.arg == failAuth {
					return h, p, unproven(fmt.Errorf("rank 0 at %s refused this rank: %s", addr, p))
				}
				return h, p, fatal("handshake", fmt.Errorf("rank 0 refused this rank: %s", p))
			}
			return h, p, nil
		case ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded):
			cause := context.Cause(ctx)
			if cause == nil {
				cause = context.DeadlineExceeded
			}
			return h, p, fatal("waiting for "+what+" from rank 0 at "+addr,
				fmt.Errorf("%w after %s (rank 0 had not heard from every rank)", cause, since(start)))
		case errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge):
			return h, p, fatal("handshake with rank 0 at "+addr, err)
		default:
			return h, p, fatal("handshake with rank 0 at "+addr, fmt.Errorf("rank 0 closed the connection: %w", shortNetErr(err)))
		}
	}
	mine, err := nonce()
	if err != nil {
		return fatal("handshake", err)
	}
	if _, err := writeFrame(c, header{kind: kindAuth}, mine, 0); err != nil {
		c.Close()
		return err
	}
	h, p, err := read("the answer to this rank's challenge", handshakeMax)
	if err != nil {
		return err
	}
	if h.kind != kindAuth || len(p) != nonceSize+proofSize {
		return fatal("handshake with rank 0 at "+addr, fmt.Errorf("%w: rank 0 answered the challenge with a %s frame of %d bytes", ErrBadFrame, h.kind, len(p)))
	}
	nonces := append(slices.Clone(mine), p[:nonceSize]...)
	if !hmac.Equal(p[nonceSize:], prove(key, labelRoot, nonces)) {
		// Not this job's rank 0: nothing more is sent to it.
		return unproven(fmt.Errorf("the process at %s %w (%s): it is not this job's rank 0", addr, errAuth, b.secretSource()))
	}
	hl := hello{rank: uint32(b.rank), size: uint32(b.size), localRank: int32(self.LocalRank), localSize: int32(self.LocalSize), host: self.Host, addr: self.Addr}
	hl.proof = prove(key, labelJoin, nonces, hl.fields())
	if _, err := writeFrame(c, header{kind: kindHello}, hl.encode(), 0); err != nil {
		c.Close()
		return err
	}
	h, p, err = read("the rank table", handshakeMax+uint64(b.size)*tableEntry+proofSize)
	if err != nil {
		return err
	}
	if h.kind != kindTable {
		return fatal("handshake with rank 0 at "+addr, fmt.Errorf("%w: rank 0 answered with a %s frame", ErrBadFrame, h.kind))
	}
	if len(p) < proofSize || !hmac.Equal(p[len(p)-proofSize:], prove(key, labelTable, nonces, p[:len(p)-proofSize])) {
		return fatal("handshake with rank 0 at "+addr, fmt.Errorf("a rank table that %w", errAuth))
	}
	p = p[:len(p)-proofSize]
	session, peers, err := decodeTable(p)
	if err == nil && (len(peers) != b.size || session == 0) {
		err = fmt.Errorf("%w: rank table of %d ranks (session %#x), want %d", ErrBadFrame, len(peers), session, b.size)
	}
	if err != nil {
		return fatal("handshake with rank 0 at "+addr, err)
	}
	for r, p := range peers {
		if r != b.rank && p.Addr == "" {
			return fatal("handshake with rank 0 at "+addr, fmt.Errorf("%w: rank table has no address for rank %d", ErrBadFrame, r))
		}
	}
	if !stop() {
		// The context ended meanwhile and is cutting the connection.
		return fatal("waiting for the rank table from rank 0 at "+addr, fmt.Errorf("%w after %s", context.Cause(ctx), since(start)))
	}
	c.SetDeadline(time.Time{})
	b.mu.Lock()
	b.session = session
	b.mu.Unlock()
	b.peers = peers
	b.ctrl[0] = newLink(c, 0, b.opts.HeartbeatTimeout)
	return nil
}

// start runs the readers, heartbeats and (except on rank 0, whose accept
// loop runs since the set-up) the accept loop of a connected Bootstrap.
func (b *Bootstrap) start() {
	if b.size == 1 {
		return
	}
	if b.rank != 0 {
		b.spawn(b.acceptLoop)
	}
	for _, l := range b.ctrl {
		if l != nil {
			b.spawn(func() { b.readCtrl(l) })
			b.spawn(func() { b.heartbeat(l) })
		}
	}
}

// acceptLoop accepts connections until the listener closes: ranks
// joining (rank 0, during the set-up) and peers opening data links.
func (b *Bootstrap) acceptLoop() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			b.logf("accepting connections: %v", err)
			select {
			case <-b.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !b.spawn(func() { b.serveConn(c) }) {
			c.Close()
			return
		}
	}
}

// serveConn reads an accepted connection's first frame and dispatches it.
func (b *Bootstrap) serveConn(c net.Conn) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		c.Close()
		return
	}
	b.pending[c] = struct{}{} // Close closes it while its first frame is awaited
	b.mu.Unlock()
	remote := c.RemoteAddr().String()
	inSetup := b.setupOver != nil && !isDone(b.setupOver)
	deadline := time.Now().Add(b.opts.Timeout)
	if inSetup && b.deadline.Before(deadline) {
		deadline = b.deadline
	}
	c.SetReadDeadline(deadline)
	h, p, err := readFrame(c, handshakeMax)
	var j joined
	if err == nil && h.kind == kindAuth && b.rank == 0 {
		// Still pending: Close ends the exchange.
		j, err = b.challenge(c, remote, p)
	}
	b.mu.Lock()
	delete(b.pending, c)
	if b.closed && err == nil {
		err = ErrClosed
	}
	b.mu.Unlock()
	if err == nil && h.kind == kindAuth && b.rank == 0 {
		c.SetReadDeadline(time.Time{})
		b.join(j)
		return
	}
	if err == nil && h.kind == kindHello && b.rank == 0 {
		err = fmt.Errorf("a hello that did not answer a challenge: it %w", errAuth)
	}
	if err == nil && h.kind == kindPeerHello {
		c.SetReadDeadline(time.Time{})
		b.acceptPeer(c, remote, p)
		return
	}
	if err == nil {
		err = fmt.Errorf("%w: first frame is a %s frame", ErrBadFrame, h.kind)
	}
	err = fmt.Errorf("connection from %s: %w", remote, err)
	b.logf("refused a %v", err)
	switch {
	case errors.Is(err, errAuth):
		// Not one of this job's ranks: refused without failing the
		// set-up, and never sent the rank table.
		refuseConnArg(c, fmt.Sprintf("rank 0 refused the connection from %s: it %s (%s)", remote, errAuth, b.secretSource()), failAuth)
	case errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge):
		refuseConn(c, err.Error())
	default:
		c.Close()
	}
	if b.setupOver != nil {
		select {
		case b.joinCh <- joined{err: err}:
		case <-b.setupOver:
		}
	}
}

// challenge is rank 0's side of the proofs, after a rank's challenge p:
// rank 0 answers with its own challenge and its proof of the secret
// over both, then reads the rank's hello, whose proof covers both
// challenges and the hello's fields. A wrong proof is errAuth.
func (b *Bootstrap) challenge(c net.Conn, remote string, p []byte) (joined, error) {
	if len(p) != nonceSize {
		return joined{}, fmt.Errorf("%w: challenge of %d bytes, want %d", ErrBadFrame, len(p), nonceSize)
	}
	mine, err := nonce()
	if err != nil {
		return joined{}, err
	}
	nonces := append(slices.Clone(p), mine...)
	answer := append(slices.Clone(mine), prove(b.key, labelRoot, nonces)...)
	c.SetWriteDeadline(time.Now().Add(byeTimeout))
	if _, err := writeFrame(c, header{kind: kindAuth}, answer, 0); err != nil {
		return joined{}, err
	}
	c.SetWriteDeadline(time.Time{})
	h, q, err := readFrame(c, handshakeMax)
	switch {
	case err != nil:
		return joined{}, err
	case h.kind != kindHello:
		return joined{}, fmt.Errorf("%w: a %s frame after the challenge, want a hello", ErrBadFrame, h.kind)
	}
	hl, err := decodeHello(q)
	if err != nil {
		return joined{}, err
	}
	if !hmac.Equal(hl.proof, prove(b.key, labelJoin, nonces, hl.fields())) {
		return joined{}, fmt.Errorf("a hello for rank %d whose proof is wrong: it %w", hl.rank, errAuth)
	}
	return joined{conn: c, hello: hl, remote: remote, nonces: nonces}, nil
}

// join hands a hello to rank 0's set-up, or refuses it once the set-up is
// over.
func (b *Bootstrap) join(j joined) {
	select {
	case b.joinCh <- j:
		return
	case <-b.setupOver:
	}
	b.mu.Lock()
	err := b.setupErr
	b.mu.Unlock()
	msg := fmt.Sprintf("rank %d joined after the set-up was over (every rank had joined)", j.hello.rank)
	if err != nil {
		msg = "rank 0 failed the set-up: " + err.Error()
	}
	refuseConn(j.conn, msg)
}

// acceptPeer checks a peer hello and serves the data link.
func (b *Bootstrap) acceptPeer(c net.Conn, remote string, p []byte) {
	ph, err := decodePeerHello(p)
	r := int(ph.rank)
	b.mu.Lock()
	switch {
	case err != nil:
	case int(ph.size) != b.size:
		err = fmt.Errorf("rank %d at %s has world size %d, this rank has %d", r, remote, ph.size, b.size)
	case ph.session != b.session:
		err = fmt.Errorf("rank %d at %s belongs to another job (session %#x, this job's is %#x)", r, remote, ph.session, b.session)
	case r >= b.size || r == b.rank:
		err = fmt.Errorf("a process at %s reported rank %d", remote, r)
	case b.closed:
		err = ErrClosed
	case b.in[r] != nil:
		err = fmt.Errorf("rank %d connected twice (now from %s)", r, remote)
	}
	if err != nil {
		b.mu.Unlock()
		b.logf("refused a data connection: %v", err)
		refuseConn(c, err.Error())
		return
	}
	l := newLink(c, r, 0)
	b.in[r] = l
	b.mu.Unlock()
	b.readData(l)
}

// writeRendezvous publishes addr in file, atomically (temporary file,
// then rename).
func writeRendezvous(file, addr string) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return publish(file, ".mscclgo-rdzv-*", addr)
}

// publish writes line to file whole or not at all: a temporary file in
// file's directory, named by pattern and created exclusively with mode
// 0600, then renamed over file (which replaces a stale one of an earlier
// job).
func publish(file, pattern, line string) error {
	f, err := os.CreateTemp(filepath.Dir(file), pattern)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), file)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// maxRendezvousBytes bounds the rendezvous file: one host:port line.
const maxRendezvousBytes = 4 << 10

// readRendezvous reads rank 0's address from file.
func readRendezvous(file string) (string, error) {
	data, err := infile.Read(file, "a rendezvous file (host:port)", maxRendezvousBytes)
	if err != nil {
		return "", err
	}
	addr := strings.TrimSpace(string(data))
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("rendezvous file %s holds %q, not host:port", file, addr)
	}
	return addr, nil
}

// listenAt listens on host's addresses at port: host resolved (IPv4
// addresses first), the first address this machine can bind. Rank 0 thus
// listens on the interface it advertises, not on every one.
func listenAt(ctx context.Context, host, port string) (net.Listener, error) {
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, shortNetErr(err))
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
		slices.SortStableFunc(ips, func(a, b net.IP) int {
			return cmp.Compare(boolInt(a.To4() == nil), boolInt(b.To4() == nil))
		})
	}
	var errs []string
	for _, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), port))
		if err == nil {
			return ln, nil
		}
		errs = append(errs, shortNetErr(err).Error())
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return nil, fmt.Errorf("%s (rank 0 listens on the address the ranks are given: it must be one of this host's)", strings.Join(errs, "; "))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// firstIPv4 returns this host's first non-loopback IPv4 address, or
// 127.0.0.1.
func firstIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
