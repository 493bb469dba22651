package gpu

// remote.go tells a communicator's ranks on other hosts of each call,
// without meeting them. The ranks of one host read each other's call
// records from their host's mailbox (mailbox.go); a peer on another host
// cannot, and the kernel does not need its buffers (port channels reach
// the peer's own process, which applies the traffic to its own buffers).
// What the gate (comm.go's resolve) needs from it is only whether it made
// the same call: its record's signature, refusal flag and description.
//
// Every call of the communicator (steady, meeting or refused) queues its
// record here; a background sender sends what is queued, as one message,
// to every rank on another host over the job's bootstrap (tag World.Tag),
// so the caller never waits for a socket, and calls made faster than the
// sender sends share a message. A receiver per remote rank files the
// records it gets by call number, where the gate takes them (a bounded,
// named wait, ended by Abort). A meeting call learns its peers' calls from
// the meeting, so it discards their records.
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

// remoteRecord is what a rank on another host said of one call.
type remoteRecord struct {
	sig     uint64
	refused bool
	desc    string
}

// remoteCalls is a rank's exchange of call records with the ranks on
// other hosts.
type remoteCalls struct {
	net   rankwire.Net
	tag   uint32
	peers []int // the ranks on other hosts
	ctx   context.Context
	wg    sync.WaitGroup

	// The sender's side: queue holds the records not yet taken by the
	// sender, sending says it is sending some; kick wakes it.
	qmu     sync.Mutex
	queue   []byte
	sending bool
	kick    chan struct{}

	// The receivers' side: got[peer][seq] are the records not yet taken,
	// gone[peer][seq] those a meeting call discarded before they arrived.
	// changed is closed (and replaced) at every arrival; err is the first
	// failure of a sender or receiver.
	mu      sync.Mutex
	got     map[int]map[uint64]remoteRecord
	gone    map[int]map[uint64]bool
	changed chan struct{}
	err     error
}

// startRemote starts rank's exchange with peers (the ranks on other
// hosts) over net with tag; it ends with ctx.
func startRemote(ctx context.Context, net rankwire.Net, tag uint32, peers []int) *remoteCalls {
	rc := &remoteCalls{net: net, tag: tag, peers: peers, ctx: ctx, kick: make(chan struct{}, 1),
		got: map[int]map[uint64]remoteRecord{}, gone: map[int]map[uint64]bool{}, changed: make(chan struct{})}
	for _, p := range peers {
		rc.got[p] = map[uint64]remoteRecord{}
		rc.gone[p] = map[uint64]bool{}
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

// send sends the queued records to every remote peer until the
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
		for _, p := range rc.peers {
			if len(msg) == 0 {
				break
			}
			if err := rc.net.Send(rc.ctx, p, rc.tag, msg); err != nil {
				if rc.ctx.Err() == nil {
					rc.setErr(fmt.Errorf("sending this rank's call records to rank %d: %w", p, err))
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
// the connections: at Close, so that the peers' last gates get them.
func (rc *remoteCalls) flush(bound time.Duration) error {
	end := time.Now().Add(bound)
	for {
		rc.qmu.Lock()
		idle := len(rc.queue) == 0 && !rc.sending
		rc.qmu.Unlock()
		if idle {
			return nil
		}
		if err := rc.failed(); err != nil {
			return err
		}
		if rc.ctx.Err() != nil {
			return fmt.Errorf("the communicator ended with call records not sent to the ranks on other hosts")
		}
		if time.Now().After(end) {
			return fmt.Errorf("this rank's call records were not sent to the ranks on other hosts (%v) within %v", rc.peers, bound)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// receive files peer's records until the communicator ends or the peer
// is lost.
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
		rc.mu.Lock()
		for i, rec := range recs {
			if rc.gone[peer][seqs[i]] {
				delete(rc.gone[peer], seqs[i])
				continue
			}
			rc.got[peer][seqs[i]] = rec
		}
		close(rc.changed)
		rc.changed = make(chan struct{})
		rc.mu.Unlock()
	}
}

// decodeRemote returns the records of a message and their call numbers.
func decodeRemote(msg []byte) ([]remoteRecord, []uint64, error) {
	var recs []remoteRecord
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
		recs = append(recs, remoteRecord{sig: sig, refused: flags&recRefused != 0, desc: string(msg[at+remoteHead : at+remoteHead+n])})
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
	close(rc.changed)
	rc.changed = make(chan struct{})
}

func (rc *remoteCalls) failed() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.err
}

// take waits (at most bound; alive ends it early) for peer's record of
// call seq and removes it.
func (rc *remoteCalls) take(peer int, seq uint64, alive func() error, bound time.Duration) (remoteRecord, error) {
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		rc.mu.Lock()
		rec, ok := rc.got[peer][seq]
		if ok {
			delete(rc.got[peer], seq)
		}
		err, ch := rc.err, rc.changed
		rc.mu.Unlock()
		if ok {
			return rec, nil
		}
		if err != nil {
			return rec, err
		}
		if err := alive(); err != nil {
			return rec, err
		}
		select {
		case <-ch:
		case <-rc.ctx.Done():
		case <-t.C:
			return rec, fmt.Errorf("its record (from another host) did not come within %v", bound)
		}
	}
}

// discard drops the remote peers' records of call seq, which this rank
// met over the bootstrap: those that came, and those still to come.
func (rc *remoteCalls) discard(seq uint64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, p := range rc.peers {
		if _, ok := rc.got[p][seq]; ok {
			delete(rc.got[p], seq)
		} else {
			rc.gone[p][seq] = true
		}
	}
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
		return errors.New("the exchange of call records with the ranks on other hosts has not ended 5 s after the communicator's")
	}
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
