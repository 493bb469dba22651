package devcomm

// remote.go tells a communicator's ranks on other hosts of each call,
// without meeting them. The ranks of one host read each other's call
// records from their host's mailbox (mailbox.go); a peer on another host
// cannot, and the kernel does not need its buffers (port channels reach
// the peer's own process, which applies the traffic to its own buffers).
// What the gate (steady.go's resolve) needs from it is only whether it made
// the same call: its record's signature, refusal flag and description.
//
// Every call of the communicator (steady, meeting or refused) queues its
// record here; a background sender sends what is queued, as one message,
// to one rank of every other host over the job's bootstrap (tag
// World.Tag), so the caller never waits for a socket, and calls made
// faster than the sender sends share a message. The rank that receives
// rank r's records on a host is the one whose index among its host's
// ranks is r's index among its own host's (modulo the host's ranks): it
// files them in the host's mailbox, in r's area (which no rank of this
// host writes otherwise), where every rank of the host reads them as it
// reads its local peers', at its gate. Filing a record waits, as a local
// publish does, until the host's ranks have read the record the ring
// slot held; a rank whose receiver fails (a lost peer, a malformed
// message) fails its calls' gates with that error.
//
// A message is a sequence of records, little-endian: the call number
// (u64), the signature (u64), flags (u32, recRefused), the length of the
// description (u32) and the description.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// remoteHead is the size of a record's fixed fields on the wire.
const remoteHead = 24

// remoteCalls is a rank's exchange of call records with the ranks on
// other hosts.
type remoteCalls struct {
	net   rankwire.Net
	tag   uint32
	to    []int // the rank of every other host that files this rank's records
	mb    *mailbox
	local []int // this host's ranks, which read the records filed
	alive func() error
	bound time.Duration
	ctx   context.Context
	wg    sync.WaitGroup

	// The sender's side: queue holds the records not yet taken by the
	// sender, sending says it is sending some, sendErr why it stopped;
	// kick wakes it.
	qmu     sync.Mutex
	queue   []byte
	sending bool
	sendErr error
	kick    chan struct{}

	// err is the first failure of the sender or a receiver.
	mu  sync.Mutex
	err error
}

// remoteRoutes returns, for rank of hosts (rank r on host hosts[r]),
// the ranks to send its records to (one per other host) and the ranks
// whose records it files (theirs are sent to it).
func remoteRoutes(hosts []int, rank int) (to, from []int) {
	index := func(r int) (i, m int) { // r's index among its host's ranks, and their number
		for q, h := range hosts {
			if h == hosts[r] {
				if q < r {
					i++
				}
				m++
			}
		}
		return i, m
	}
	ri, rm := index(rank)
	done := map[int]bool{hosts[rank]: true}
	for _, h := range hosts {
		if done[h] {
			continue
		}
		done[h] = true
		var on []int
		for q, hq := range hosts {
			if hq == h {
				on = append(on, q)
			}
		}
		to = append(to, on[ri%len(on)])
	}
	for q, h := range hosts {
		if h == hosts[rank] {
			continue
		}
		if qi, _ := index(q); qi%rm == ri {
			from = append(from, q)
		}
	}
	return to, from
}

// startRemote starts this rank's exchange over net with tag: it sends to
// the ranks in to and files what the ranks in from send in mb, for the
// ranks of this host (local). Filing a record waits at most bound, and
// alive ends it; the exchange ends with ctx.
func startRemote(ctx context.Context, net rankwire.Net, tag uint32, to, from []int, mb *mailbox, local []int, alive func() error, bound time.Duration) *remoteCalls {
	rc := &remoteCalls{net: net, tag: tag, to: to, mb: mb, local: local, alive: alive, bound: bound, ctx: ctx, kick: make(chan struct{}, 1)}
	for _, p := range from {
		rc.wg.Add(1)
		go rc.receive(p)
	}
	rc.wg.Add(1)
	go rc.send()
	return rc
}

// post queues the record of call seq for the remote peers; it never
// waits for the network.
func (rc *remoteCalls) post(seq uint64, rec callRecord) {
	d := rec.desc
	if len(d) > mbDescBytes-8 {
		d = d[:mbDescBytes-8]
	}
	var flags uint32
	if rec.refused {
		flags |= recRefused
	}
	rc.qmu.Lock()
	le := binary.LittleEndian
	rc.queue = le.AppendUint64(rc.queue, seq)
	rc.queue = le.AppendUint64(rc.queue, rec.sig)
	rc.queue = le.AppendUint32(rc.queue, flags)
	rc.queue = le.AppendUint32(rc.queue, uint32(len(d)))
	rc.queue = append(rc.queue, d...)
	rc.qmu.Unlock()
	select {
	case rc.kick <- struct{}{}:
	default: // the sender is woken already
	}
}

// send sends the queued records to the ranks that file them until the
// communicator ends or a send fails.
func (rc *remoteCalls) send() {
	defer rc.wg.Done()
	for {
		select {
		case <-rc.ctx.Done():
			return
		case <-rc.kick:
		}
		rc.qmu.Lock()
		msg := rc.queue
		rc.queue = nil
		rc.sending = len(msg) > 0
		rc.qmu.Unlock()
		for _, p := range rc.to {
			if len(msg) == 0 {
				break
			}
			if err := rc.net.Send(rc.ctx, p, rc.tag, msg); err != nil {
				err = fmt.Errorf("sending this rank's call records to rank %d: %w", p, err)
				rc.qmu.Lock()
				rc.sendErr = err
				rc.qmu.Unlock()
				if rc.ctx.Err() == nil {
					rc.setErr(err)
				}
				return
			}
		}
		rc.qmu.Lock()
		rc.sending = false
		rc.qmu.Unlock()
	}
}

// flush waits (at most bound) until every queued record was handed to
// the connections, or the sender stopped: at Close, so that the peers'
// last gates get them.
func (rc *remoteCalls) flush(bound time.Duration) error {
	end := time.Now().Add(bound)
	for {
		rc.qmu.Lock()
		idle, err := len(rc.queue) == 0 && !rc.sending, rc.sendErr
		rc.qmu.Unlock()
		if idle || err != nil {
			// (A failed send is already the error of this rank's
			// later gates; the peer it went to is gone.)
			return nil
		}
		if rc.ctx.Err() != nil {
			return errors.New("the communicator ended with call records not sent to the ranks on other hosts")
		}
		if time.Now().After(end) {
			return fmt.Errorf("this rank's call records were not sent to ranks %v (on other hosts) within %v", rc.to, bound)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// receive files peer's records in the mailbox until the communicator
// ends or the peer is lost.
func (rc *remoteCalls) receive(peer int) {
	defer rc.wg.Done()
	for {
		msg, err := rc.net.Recv(rc.ctx, peer, rc.tag)
		if err != nil {
			if rc.ctx.Err() == nil {
				rc.setErr(fmt.Errorf("receiving rank %d's call records: %w", peer, err))
			}
			return
		}
		recs, seqs, err := decodeRemote(msg)
		if err != nil {
			rc.setErr(fmt.Errorf("rank %d's call records: %w", peer, err))
			return
		}
		for i, rec := range recs {
			rec.bufs = [2]slot{{alloc: -1}, {alloc: -1}} // never read: the kernel does not address them
			if err := rc.mb.publish(peer, seqs[i], rec, rc.local, rc.alive, rc.bound); err != nil {
				if rc.ctx.Err() == nil {
					rc.setErr(fmt.Errorf("filing rank %d's record of call %d: %w", peer, seqs[i], err))
				}
				return
			}
		}
	}
}

// decodeRemote returns the records of a message and their call numbers.
func decodeRemote(msg []byte) ([]callRecord, []uint64, error) {
	var recs []callRecord
	var seqs []uint64
	le := binary.LittleEndian
	for at := 0; at < len(msg); {
		if len(msg)-at < remoteHead {
			return nil, nil, fmt.Errorf("a record of %d bytes at byte %d, want at least %d", len(msg)-at, at, remoteHead)
		}
		seq, sig := le.Uint64(msg[at:]), le.Uint64(msg[at+8:])
		flags, n := le.Uint32(msg[at+16:]), int(le.Uint32(msg[at+20:]))
		if flags&^recRefused != 0 {
			return nil, nil, fmt.Errorf("call %d: unknown flags %#x", seq, flags)
		}
		if n > mbDescBytes || n > len(msg)-at-remoteHead {
			return nil, nil, fmt.Errorf("call %d: a description of %d bytes in a record of %d", seq, n, len(msg)-at-remoteHead)
		}
		recs = append(recs, callRecord{sig: sig, refused: flags&recRefused != 0, desc: string(msg[at+remoteHead : at+remoteHead+n])})
		seqs = append(seqs, seq)
		at += remoteHead + n
	}
	return recs, seqs, nil
}

func (rc *remoteCalls) setErr(err error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.err == nil {
		rc.err = err
	}
}

// failed is the first failure of the sender or a receiver, nil if none.
func (rc *remoteCalls) failed() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.err
}

// stop waits (at most 5 s) for the sender and receivers to end, once
// the communicator's context has ended.
func (rc *remoteCalls) stop() error {
	done := make(chan struct{})
	go func() { rc.wg.Wait(); close(done) }()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return errors.New("the exchange of call records with the ranks on other hosts has not ended 5 s after the communicator")
	}
}

// startRemote starts the exchange of call records with the ranks on
// other hosts, if there are any; c.mb is set.
func (c *Comm) startRemote() {
	to, from := remoteRoutes(c.w.Host, c.rank)
	if len(to) == 0 {
		return
	}
	var local []int
	for r := range c.n {
		if c.local(r) {
			local = append(local, r)
		}
	}
	c.rc = startRemote(c.ctx, c.w.Net, c.w.Tag, to, from, c.mb, local, c.ctx.Err, c.cfg.SetupTimeout)
}

// tellRemote queues the record of call seq for the ranks on other
// hosts, if any.
func (c *Comm) tellRemote(seq uint64, rec callRecord) {
	if c.rc != nil {
		c.rc.post(seq, rec)
	}
}

// local reports whether rank r is on this rank's host.
func (c *Comm) local(r int) bool { return c.w.Host[r] == c.w.Host[c.rank] }
