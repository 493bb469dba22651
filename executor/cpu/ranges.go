package cpu

import (
	"sync"
	"unsafe"
)

// rangeLocks make every data op (every block of a packet op, every proxy
// transfer) one atomic step with respect to the ops whose memory it
// conflicts with, without race detection too. A correct plan never runs
// conflicting ops at once, so its ops never wait here and run fully in
// parallel; a racy plan (MSCCL++'s reduce_tbg, a unit-test plan) gets
// its conflicting ops serialised in some order, as if each op were
// executed by the whole block at once, instead of racing at the Go level.
// Ranges are memory addresses, so aliased buffers (in-place input and
// output) conflict as they should.
//
// A holder never blocks while holding ranges (it only copies, reduces and
// packs), so waiting here cannot deadlock and needs no cancellation.
// Packet flag polling uses atomics and takes no ranges.
type rangeLocks struct {
	mu      sync.Mutex
	cond    sync.Cond
	held    []*rangeHold
	waiting int
}

type memRange struct {
	lo, hi uintptr
	write  bool
}

type rangeHold struct {
	rs []memRange
}

func newRangeLocks() *rangeLocks {
	rl := &rangeLocks{}
	rl.cond.L = &rl.mu
	return rl
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// add appends the memory of spans to h.
func (h *rangeHold) add(write bool, sps ...span) {
	for _, sp := range sps {
		if len(sp.b) > 0 {
			a := addr(sp.b)
			h.rs = append(h.rs, memRange{lo: a, hi: a + uintptr(len(sp.b)), write: write})
		}
	}
}

func (h *rangeHold) conflicts(o *rangeHold) bool {
	for _, a := range h.rs {
		for _, b := range o.rs {
			if (a.write || b.write) && a.lo < b.hi && b.lo < a.hi {
				return true
			}
		}
	}
	return false
}

// acquire waits until no held set conflicts with h, then holds h.
func (rl *rangeLocks) acquire(h *rangeHold) {
	if len(h.rs) == 0 {
		return
	}
	rl.mu.Lock()
	for {
		free := true
		for _, o := range rl.held {
			if h.conflicts(o) {
				free = false
				break
			}
		}
		if free {
			break
		}
		rl.waiting++
		rl.cond.Wait()
		rl.waiting--
	}
	rl.held = append(rl.held, h)
	rl.mu.Unlock()
}

func (rl *rangeLocks) release(h *rangeHold) {
	if len(h.rs) == 0 {
		return
	}
	rl.mu.Lock()
	for i, o := range rl.held {
		if o == h {
			last := len(rl.held) - 1
			rl.held[i] = rl.held[last]
			rl.held[last] = nil
			rl.held = rl.held[:last]
			break
		}
	}
	if rl.waiting > 0 {
		rl.cond.Broadcast()
	}
	rl.mu.Unlock()
}
