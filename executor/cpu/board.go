package cpu

// board.go: a job's arrival board, in shared memory, for ranks that are
// processes of one host: each rank says in its slot which call it has
// come to (and with which signature), and its peers read that with a
// load instead of a message through the bootstrap's sockets. A waiter
// spins briefly, then sleeps on the board's bell (a futex) with a
// timeout; every post rings the bell.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// The board's layout: a header line (the bell and its sleepers' count),
// then one slot per rank: its arrived call + 1, the call + 1 it last gave
// up on, whether it left, and the signatures of its last two calls (call
// n in entry n%2), each its length, its FNV-64 hash and its first
// boardSig bytes.
const (
	boardHeader = 64
	boardSig    = 448
	boardEntry  = 16 + boardSig
	boardSlot   = 64 + 2*boardEntry
)

// Board is one rank's view of a job's arrival board (OpenBoard).
type Board struct {
	rank, n int
	m       *mapping
	bell    *uint32
	sleep   *uint32
}

// OpenBoard opens the arrival board of the job of net, on every rank at
// once: rank 0 creates it in shmDir (shmfile.Dir's rules), every other
// rank maps it. Every rank must be on one host (the caller checks). An
// error on any rank is every rank's.
func OpenBoard(ctx context.Context, net rankwire.Net, shmDir string) (*Board, error) {
	rank, n := net.Rank(), net.Size()
	size := uint64(boardHeader + n*boardSlot)
	mine := exchange{}
	var own *mapping
	if rank == 0 {
		p, m, err := createMapping(shmDir, size)
		if err != nil {
			mine.Err = err.Error()
		} else {
			own, mine.Path, mine.Size = m, p, size
			defer os.Remove(p)
		}
	}
	all, err := gatherExchange(ctx, net, mine, "arrival board")
	if err != nil {
		own.release()
		return nil, err
	}
	mine = exchange{}
	if rank != 0 {
		if own, err = openMapping(all[0].Path, size); err != nil {
			mine.Err = fmt.Sprintf("mapping rank 0's arrival board: %v", err)
		}
	}
	if _, err := gatherExchange(ctx, net, mine, "mapping the arrival board"); err != nil {
		own.release()
		return nil, err
	}
	b := own.b
	return &Board{rank: rank, n: n, m: own, bell: (*uint32)(unsafe.Pointer(&b[0])), sleep: (*uint32)(unsafe.Pointer(&b[4]))}, nil
}

// slot is rank q's slot.
func (b *Board) slot(q int) []byte {
	at := boardHeader + q*boardSlot
	return b.m.b[at : at+boardSlot : at+boardSlot]
}

func word(p []byte) *uint64 { return (*uint64)(unsafe.Pointer(&p[0])) }

// Post says that this rank has come to call (numbered from 0) with
// signature sig, and wakes the peers that wait.
func (b *Board) Post(call uint64, sig []byte) {
	s := b.slot(b.rank)
	e := s[64+int(call%2)*boardEntry:][:boardEntry]
	h := fnv.New64a()
	h.Write(sig)
	binary.LittleEndian.PutUint64(e[0:], uint64(len(sig)))
	binary.LittleEndian.PutUint64(e[8:], h.Sum64())
	copy(e[16:], sig)
	atomic.StoreUint64(word(s[0:]), call+1)
	b.ring()
}

// GiveUp says that this rank stopped waiting for call: a peer that comes
// to it later learns that this rank moved on.
func (b *Board) GiveUp(call uint64) {
	atomic.StoreUint64(word(b.slot(b.rank)[8:]), call+1)
	b.ring()
}

// Leave says that this rank ended its communicator: a peer that waits
// for it learns so.
func (b *Board) Leave() {
	atomic.StoreUint64(word(b.slot(b.rank)[16:]), 1)
	b.ring()
}

func (b *Board) ring() {
	atomic.AddUint32(b.bell, 1)
	if atomic.LoadUint32(b.sleep) != 0 {
		wakeAll(b.bell)
	}
}

// PeerState is what rank q's slot says, as Wait reads it for one call.
type PeerState int

// The states of a peer for call n.
const (
	PeerAbsent  PeerState = iota // not come to call n yet
	PeerArrived                  // come to call n (or come past it, having done it)
	PeerMovedOn                  // gave up on call n, or is further on than n allows
	PeerLeft                     // ended its communicator
)

// Peer reads rank q's state for call n (arrived, even where it left
// since; else left; else moved on; else absent); where it has arrived,
// sig is its signature for n (its first boardSig bytes where longer)
// and same says whether it equals mine (compared whole, through the
// hash, past those). Its arrived counter is past (its last call + 1)
// for the error messages.
func (b *Board) Peer(q int, n uint64, mine []byte) (st PeerState, sig string, same bool, past uint64) {
	s := b.slot(q)
	past = atomic.LoadUint64(word(s[0:]))
	gave := atomic.LoadUint64(word(s[8:]))
	// Read after its arrival: a peer that came to n and then left (it
	// found the calls mismatched and ended) has arrived.
	left := atomic.LoadUint64(word(s[16:])) != 0
	switch {
	case gave <= n && past >= n+1 && past <= n+2:
	case left:
		return PeerLeft, "", false, past
	case gave > n || past > n+2:
		return PeerMovedOn, "", false, past
	default:
		return PeerAbsent, "", false, past
	}
	// Call n's entry: a peer at n+1 wrote the other one (it cannot go
	// further before this rank comes to n+1).
	e := s[64+int(n%2)*boardEntry:][:boardEntry]
	ln := binary.LittleEndian.Uint64(e[0:])
	hs := binary.LittleEndian.Uint64(e[8:])
	shown := e[16 : 16+min(ln, boardSig)]
	h := fnv.New64a()
	h.Write(mine)
	same = ln == uint64(len(mine)) && hs == h.Sum64() && string(shown) == string(mine[:min(len(mine), boardSig)])
	return PeerArrived, string(shown), same, past
}

// Wait waits until check reports done, or for at most d: it spins a
// little (a peer that is running comes soon), then sleeps on the bell
// until a post or up to a millisecond at a time. It returns
// context.DeadlineExceeded at d, ctx's error when ctx ends.
func (b *Board) Wait(ctx context.Context, d time.Duration, check func() bool) error {
	const spins = 200
	deadline := time.Now().Add(d)
	for i := 0; ; i++ {
		bell := atomic.LoadUint32(b.bell)
		if check() {
			return nil
		}
		if i < spins {
			runtime.Gosched()
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return context.DeadlineExceeded
		}
		atomic.AddUint32(b.sleep, 1)
		if atomic.LoadUint32(b.bell) == bell {
			sleepOn(b.bell, bell, min(left, time.Millisecond))
		}
		atomic.AddUint32(b.sleep, ^uint32(0))
	}
}

// Close unmaps the board (after Leave, where the rank leaves).
func (b *Board) Close() {
	if b != nil {
		b.m.release()
	}
}
