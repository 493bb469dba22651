package devcomm

// mailbox.go holds a communicator's mailbox: the memory through which
// the ranks of one host tell each other of their calls without meeting
// (steady.go). For each rank it holds a ring of call records, one per call
// sequence number (the call's signature, its input and output, and its
// description, for the report of a mismatch), and a table of the
// allocations the rank has registered (their IPC handles, which peers in
// other processes map once). It is a file in /dev/shm (mailbox_unix.go)
// mapped by every rank of the host, threads of one process and processes
// alike, and read and written with atomics: publishing a record is a few
// stores, reading the peers' a few loads, never a system call.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/gpu"
)

const (
	mbRing      = 256 // call records per rank
	mbRecord    = 512 // bytes per call record
	mbAllocs    = 256 // registered allocations per rank
	mbAlloc     = 128 // bytes per allocation entry
	mbCtl       = 64  // bytes of a rank's control words
	mbDescBytes = mbRecord - mbDescAt
	mbDescAt    = 112
)

// Offsets in a call record.
const (
	recSeq   = 0  // seq+1, stored last (0: empty)
	recSig   = 8  // the signature
	recFlags = 16 // recRefused
	recBufs  = 24 // two bufSlots of 40 bytes: ptr, base, size, id, alloc index+1
	recDesc  = 104
)

const recRefused = 1 // the rank refused the call; desc says why

// mailbox is one host's mailbox as this rank maps it.
type mailbox struct {
	b     []byte
	n     int // ranks of the communicator (every rank has its area)
	unmap func() error
	// peersRead[r] is what rank r's publish last saw its peers read (the
	// least of their consumed words; they only grow): while its ring
	// has room beyond that, publish reads none of theirs, whose cache
	// lines other processes write.
	peersRead []uint64
}

func mailboxSize(n int) uint64 {
	return uint64(n) * (mbCtl + mbRing*mbRecord + mbAllocs*mbAlloc)
}

func (mb *mailbox) area(r int) []byte {
	per := uint64(mbCtl + mbRing*mbRecord + mbAllocs*mbAlloc)
	return mb.b[uint64(r)*per : uint64(r+1)*per]
}

func word(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

func (mb *mailbox) record(r int, seq uint64) []byte {
	a := mb.area(r)
	at := mbCtl + int(seq%mbRing)*mbRecord
	return a[at : at+mbRecord]
}

// consumed is the word in which rank r says up to which call it has
// read its peers' records.
func (mb *mailbox) consumed(r int) *uint64 { return word(mb.area(r), 0) }

// allocCount is the number of rank r's registered allocations.
func (mb *mailbox) allocCount(r int) *uint64 { return word(mb.area(r), 8) }

// ended is the word in which rank r says that it ended its communicator
// (Close, Abort): the number of calls it made, plus one (0 while it
// lives). Every record of those calls was published before it.
func (mb *mailbox) ended(r int) *uint64 { return word(mb.area(r), 16) }

// gone is the error of a wait for rank r's record of call seq that can
// never end, nil while it may: r ended its communicator before it made
// the call.
func (mb *mailbox) gone(r int, seq uint64) error {
	if e := atomic.LoadUint64(mb.ended(r)); e != 0 && seq+1 >= e {
		return fmt.Errorf("rank %d ended its communicator (ncclCommDestroy or ncclCommAbort) after its first %d calls: it will not make call %d", r, e-1, seq)
	}
	return nil
}

func (mb *mailbox) alloc(r, i int) []byte {
	a := mb.area(r)
	at := mbCtl + mbRing*mbRecord + i*mbAlloc
	return a[at : at+mbAlloc]
}

// slot is one buffer of a call record.
type slot struct {
	ptr, base, size, id uint64
	alloc               int // index in the rank's allocation table, -1: none
}

// callRecord is what a rank publishes of one call.
type callRecord struct {
	sig     uint64
	refused bool
	bufs    [2]slot
	desc    string
}

// signature hashes what every rank's call must agree on.
func signature(key, desc string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(desc))
	return h.Sum64()
}

// publish writes rank r's record of call seq. It first waits (at most
// bound) until every peer has read the record the slot held, mbRing
// calls earlier.
func (mb *mailbox) publish(r int, seq uint64, rec callRecord, peers []int, alive func() error, bound time.Duration) error {
	if seq >= mbRing && len(peers) > 0 && atomic.LoadUint64(&mb.peersRead[r])+mbRing < seq+1 {
		var least uint64
		if err := mb.waitFor(func() bool {
			least = ^uint64(0)
			for _, p := range peers {
				v := atomic.LoadUint64(mb.consumed(p))
				if v+mbRing < seq+1 {
					return false
				}
				least = min(least, v)
			}
			return true
		}, alive, bound); err != nil {
			return fmt.Errorf("publishing call %d: the peers have not read call %d: %w", seq, seq-mbRing, err)
		}
		atomic.StoreUint64(&mb.peersRead[r], least)
	}
	b := mb.record(r, seq)
	le := binary.LittleEndian
	le.PutUint64(b[recSig:], rec.sig)
	var flags uint64
	if rec.refused {
		flags |= recRefused
	}
	le.PutUint64(b[recFlags:], flags)
	for i, s := range rec.bufs {
		at := recBufs + 40*i
		le.PutUint64(b[at:], s.ptr)
		le.PutUint64(b[at+8:], s.base)
		le.PutUint64(b[at+16:], s.size)
		le.PutUint64(b[at+24:], s.id)
		le.PutUint64(b[at+32:], uint64(s.alloc+1))
	}
	d := rec.desc
	if len(d) > mbDescBytes-8 {
		d = d[:mbDescBytes-8]
	}
	le.PutUint64(b[recDesc:], uint64(len(d)))
	copy(b[recDesc+8:], d)
	atomic.StoreUint64(word(b, recSeq), seq+1)
	return nil
}

// read returns rank r's record of call seq; ok is false while it has not
// published it.
func (mb *mailbox) read(r int, seq uint64) (rec callRecord, ok bool, err error) {
	b := mb.record(r, seq)
	got := atomic.LoadUint64(word(b, recSeq))
	if got != seq+1 {
		if got > seq+1 {
			return rec, false, fmt.Errorf("rank %d's record of call %d was overwritten by call %d", r, seq, got-1)
		}
		return rec, false, nil
	}
	le := binary.LittleEndian
	rec.sig = le.Uint64(b[recSig:])
	rec.refused = le.Uint64(b[recFlags:])&recRefused != 0
	for i := range rec.bufs {
		at := recBufs + 40*i
		rec.bufs[i] = slot{ptr: le.Uint64(b[at:]), base: le.Uint64(b[at+8:]), size: le.Uint64(b[at+16:]),
			id: le.Uint64(b[at+24:]), alloc: int(le.Uint64(b[at+32:])) - 1}
	}
	n := min(le.Uint64(b[recDesc:]), mbDescBytes-8)
	rec.desc = string(b[recDesc+8 : recDesc+8+int(n)])
	return rec, true, nil
}

// markConsumed says that rank r has read its peers' records up to call
// seq (a later call's never lowers it).
func (mb *mailbox) markConsumed(r int, seq uint64) {
	w := mb.consumed(r)
	for {
		old := atomic.LoadUint64(w)
		if old >= seq+1 || atomic.CompareAndSwapUint64(w, old, seq+1) {
			return
		}
	}
}

// register adds an allocation with its IPC handle to rank r's table and
// returns its index.
func (mb *mailbox) register(r int, base, size, id uint64, h gpu.IpcHandle) (int, error) {
	i := int(atomic.LoadUint64(mb.allocCount(r)))
	if i >= mbAllocs {
		return 0, fmt.Errorf("rank %d has registered %d allocations, the most a communicator holds", r, mbAllocs)
	}
	b := mb.alloc(r, i)
	le := binary.LittleEndian
	le.PutUint64(b[0:], base)
	le.PutUint64(b[8:], size)
	le.PutUint64(b[16:], id)
	copy(b[24:24+len(h)], h[:])
	atomic.StoreUint64(mb.allocCount(r), uint64(i+1))
	return i, nil
}

// handle returns the IPC handle of rank r's registered allocation i.
func (mb *mailbox) handle(r, i int) (gpu.IpcHandle, error) {
	var h gpu.IpcHandle
	if i < 0 || i >= int(atomic.LoadUint64(mb.allocCount(r))) {
		return h, fmt.Errorf("rank %d has no registered allocation %d", r, i)
	}
	copy(h[:], mb.alloc(r, i)[24:])
	return h, nil
}

// waitFor polls cond until it holds: spinning briefly, then sleeping a
// little longer each time, at most bound in all; alive ends it early
// (Abort, the communicator's end).
func (mb *mailbox) waitFor(cond func() bool, alive func() error, bound time.Duration) error {
	if cond() {
		return nil
	}
	end := time.Now().Add(bound)
	pause := time.Microsecond
	for i := 0; ; i++ {
		if cond() {
			return nil
		}
		if err := alive(); err != nil {
			return err
		}
		if time.Now().After(end) {
			return fmt.Errorf("not within %v", bound)
		}
		if i < 64 {
			continue
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

var errNoMailbox = errors.New("no shared memory for a mailbox on this system")
