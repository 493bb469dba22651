package cpu

import (
	"sync"
	"sync/atomic"
)

// sum_split.go splits one large reduce op over several goroutines, each
// reducing a disjoint range of elements with the loops of ops.go and
// sum.go, so that a reduction that has the cores runs at memory speed
// rather than at one core's. The order of the operands and the rounding
// of every element are those of one goroutine (the ranges share no
// element), so the results are byte-identical. A large copy (one pair of
// a copy op, source and destination apart) splits the same way.
//
// A launch already runs every thread block as a goroutine: where the
// thread blocks reducing at once fill the cores (8 ranks in one process),
// an op gets one part; where they do not (one rank per process, a plan
// of few thread blocks) it gets the idle share. The split is only for
// ops of at least two parts of splitPart bytes.

// splitPart is the least bytes a part of a split reduce op takes: well
// above a goroutine's start (about a microsecond, against some 15 µs for
// the part), a multiple of reduceBlock.
const splitPart = 4 * reduceBlock

// splitter is a session's bound on the goroutines of one large data op
// (executor.Options.Threads, or GOMAXPROCS shared among the ranks of the
// host) and the count of large reduce ops and copies running now.
type splitter struct {
	threads int
	running atomic.Int32
	splits  atomic.Int64 // ops split so far (the tests read it)
}

// enter counts a data op of n bytes as running and returns the parts
// it splits into (1: none); leave ends it.
func (s *splitter) enter(n int) int {
	return splitParts(s.threads, int(s.running.Add(1)), n)
}

// leave ends an op that enter counted.
func (s *splitter) leave() { s.running.Add(-1) }

// splitParts is the parts of an op of n bytes when active large data
// ops (this one included) share threads goroutines.
func splitParts(threads, active, n int) int {
	parts := threads / max(active, 1)
	return max(1, min(parts, n/splitPart))
}

// splitRanges returns the parts ranges [lo, hi) of [0, n): every bound
// but n a multiple of reduceBlock (so of every element size), none
// empty.
func splitRanges(n, parts int) [][2]int {
	blocks := (n + reduceBlock - 1) / reduceBlock
	per := (blocks + parts - 1) / parts
	var r [][2]int
	for lo := 0; lo < n; lo += per * reduceBlock {
		r = append(r, [2]int{lo, min(lo+per*reduceBlock, n)})
	}
	return r
}

// hostShare is the goroutines each rank on host[rank]'s host gets of
// procs: procs over the ranks there, at least one.
func hostShare(procs int, host []int, rank int) int {
	if rank < 0 || rank >= len(host) {
		return procs
	}
	local := 0
	for _, h := range host {
		if h == host[rank] {
			local++
		}
	}
	return max(1, procs/max(local, 1))
}

// reduceSplit runs reduceRange over the ranges of parts parts at once:
// the first on the calling goroutine, each other on a goroutine of its
// own with its own block buffers (t.bufs.parts, kept with the thread
// block's). It returns the first error of a part.
func (t *tbRun) reduceSplit(src, dst []span, direct, stream bool, parts int) error {
	rs := splitRanges(len(src[0].b), parts)
	t.l.s.split.splits.Add(1)
	for len(t.bufs.parts) < len(rs)-1 {
		t.bufs.parts = append(t.bufs.parts, &tbBufs{})
	}
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i := 1; i < len(rs); i++ {
		wg.Go(func() { errs[i] = t.reduceRange(src, dst, direct, stream, rs[i][0], rs[i][1], t.bufs.parts[i-1]) })
	}
	errs[0] = t.reduceRange(src, dst, direct, stream, rs[0][0], rs[0][1], t.bufs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// copySplit is copyRange over the ranges of parts parts at once, the
// first on the calling goroutine.
func (t *tbRun) copySplit(d, s []byte, parts int) error {
	rs := splitRanges(len(d), parts)
	t.l.s.split.splits.Add(1)
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i := 1; i < len(rs); i++ {
		wg.Go(func() { errs[i] = t.copyRange(d, s, rs[i][0], rs[i][1]) })
	}
	errs[0] = t.copyRange(d, s, rs[0][0], rs[0][1])
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
