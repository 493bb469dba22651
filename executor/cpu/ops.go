package cpu

import (
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Block sizes: the most work one step does between checks for a stopped
// launch and progress reports. Reductions use blocks that stay in cache.
const (
	copyBlock   = 4 << 20
	reduceBlock = 64 << 10
	pktBlock    = 2048 // packets
	bufBlock    = 64 << 10
)

// data runs a data op at pipeline offset o with unit u.
func (t *tbRun) data(op *executor.OpInstance, o, u uint64) error {
	sp, err := t.resolve(op, o, u)
	if err != nil {
		return err
	}
	if err := t.move(op, sp); err != nil {
		return err
	}
	t.l.s.prov.data(t, op, sp)
	return nil
}

// move performs the data movement of op on its resolved operands.
func (t *tbRun) move(op *executor.OpInstance, sp *opSpans) error {
	switch ty := op.Type; {
	case ty == plan.OpCopy, ty == plan.OpGet:
		return t.copyPairs(sp.src, sp.dst)
	case ty.Family() == plan.FamPut && !ty.Packet(): // the put family, without packets
		if op.ChannelType == plan.Port {
			return t.portPut(op, sp.src, sp.dst, false)
		}
		// Memory channels: pws and pwsf are plain puts (docs/semantics.md §2.5).
		return t.copyPairs(sp.src, sp.dst)
	case ty.ReducesElements(): // reductions of elements
		return t.reduce(sp.src, sp.dst)
	case ty == plan.OpMultiStore:
		srcs := make([]span, len(sp.dst))
		for i := range srcs {
			srcs[i] = sp.src[0]
		}
		return t.copyPairs(srcs, sp.dst)
	case ty == plan.OpPutPacket:
		if op.ChannelType == plan.Port {
			return t.portPut(op, sp.src, sp.dst, true)
		}
		for i := range sp.dst {
			p := pktPlan{np: uint64(len(sp.dst[i].b)) / t.l.s.packet, rawIn: sp.src[i : i+1], pktOut: sp.dst[i : i+1]}
			if err := t.packetOp(&p); err != nil {
				return err
			}
		}
		return nil
	case ty == plan.OpReadPutPacket:
		if op.ChannelType == plan.Port {
			return t.readPutPort(op, sp)
		}
		return t.packetOp(&sp.pk)
	default:
		return t.packetOp(&sp.pk)
	}
}

func (t *tbRun) stopped() error {
	if t.l.stop.Load() {
		return errStop
	}
	return nil
}

// copyPairs copies src[i] to dst[i] (equal lengths) as one step, pair
// after pair; a large pair is split over idle cores as a reduce op is
// (sum_split.go).
func (t *tbRun) copyPairs(src, dst []span) error {
	defer t.enter(src, dst)()
	for i := range dst {
		d, s := dst[i].b, src[i].b
		if overlap(d, s) {
			copy(d, s) // memmove; small or pathological
			continue
		}
		if err := t.copyPair(d, s); err != nil {
			return err
		}
	}
	return nil
}

// copyPair copies s to d (apart, equal lengths): split in parts where
// the session's large data ops leave cores idle.
func (t *tbRun) copyPair(d, s []byte) error {
	if n := len(d); n >= 2*splitPart {
		parts := t.l.s.split.enter(n)
		defer t.l.s.split.leave()
		if parts > 1 {
			return t.copySplit(d, s, parts)
		}
	}
	return t.copyRange(d, s, 0, len(d))
}

// copyRange copies bytes [lo, hi) of s to d in blocks.
func (t *tbRun) copyRange(d, s []byte, lo, hi int) error {
	for off := lo; off < hi; off += copyBlock {
		if err := t.stopped(); err != nil {
			return err
		}
		e := min(off+copyBlock, hi)
		copy(d[off:e], s[off:e])
		t.l.progress.Add(1)
	}
	return nil
}

// reduce computes ((src0 ⊕ src1) ⊕ src2) ⊕ … (docs/semantics.md §2.6) in blocks and stores
// the result to every destination; ⊕ is the session's reduction (sum.go's
// fast loops for ReduceSum). A large op is split over several goroutines
// where the session's reduce ops leave cores idle (sum_split.go).
func (t *tbRun) reduce(src, dst []span) error {
	defer t.enter(src, dst)()
	n := len(src[0].b)
	d0 := dst[0].b
	// Accumulate straight into dst0 unless it partially overlaps src0 or
	// src1 or overlaps a later source (which it would clobber first).
	direct := true
	for k, s := range src {
		if overlap(d0, s.b) && (k > 1 || !same(d0, s.b)) {
			direct = false
		}
	}
	// A large op that writes one destination straight ends with streaming
	// stores (executor.ElemType.ReduceStream): its result would only
	// evict the operands still to be read.
	stream := n >= executor.StreamBytes && direct && len(dst) == 1 && len(src) > 1 && t.l.s.combineStream != nil
	if n >= 2*splitPart && len(src) > 1 {
		parts := t.l.s.split.enter(n)
		defer t.l.s.split.leave()
		if parts > 1 && splitSafe(src, dst) {
			return t.reduceSplit(src, dst, direct, stream, parts)
		}
	}
	return t.reduceRange(src, dst, direct, stream, 0, n, t.bufs)
}

// splitSafe reports whether an op may be split: no destination overlaps
// a source but where the first destination is the first or the second
// source itself (were one to, a part would read what another part wrote
// already, or the other way round, unlike one goroutine's order). A part
// reads and writes only its own range of every operand.
func splitSafe(src, dst []span) bool {
	for i, d := range dst {
		for _, e := range dst[i+1:] {
			if overlap(d.b, e.b) && !same(d.b, e.b) {
				return false
			}
		}
		for k, s := range src {
			if overlap(d.b, s.b) && (i > 0 || k > 1 || !same(d.b, s.b)) {
				return false
			}
		}
	}
	return true
}

// reduceRange is reduce over bytes [lo, hi) of every operand (lo, hi
// multiples of the element size), with the block buffers of b; with
// stream, the last pass over each block stores through
// session.combineStream.
func (t *tbRun) reduceRange(src, dst []span, direct, stream bool, lo, hi int, b *tbBufs) error {
	dt := t.l.s.dt
	sum := t.l.s.red == executor.ReduceSum
	last := t.l.s.combine
	if stream {
		last = t.l.s.combineStream
	}
	d0 := dst[0].b
	for off := lo; off < hi; off += reduceBlock {
		if err := t.stopped(); err != nil {
			return err
		}
		e := min(off+reduceBlock, hi)
		res := d0[off:e]
		if !direct {
			res = b.accBuf(e - off)
		}
		if len(src) == 1 {
			copy(res, src[0].b[off:e])
		} else if sum {
			if et, ok := dt.(executor.ElemType); !ok || !sumElems(et, res, src, off, e, b.f32Buf) {
				pairwise(res, src, off, e, dt.Add, last)
			}
		} else {
			// PROD, MAX, MIN: pairwise in operand order, one pass per
			// source over an L1-sized block.
			pairwise(res, src, off, e, t.l.s.combine, last)
		}
		if !direct {
			copy(d0[off:e], res)
		}
		for _, d := range dst[1:] {
			copy(d.b[off:e], res)
		}
		t.l.progress.Add(1)
	}
	return nil
}

// pairwise stores ((src0 ⊕ src1) ⊕ src2) ⊕ … of bytes [off, e) into res
// (at least two sources), each pass through comb but the last, which
// goes through last.
func pairwise(res []byte, src []span, off, e int, comb, last func(dst, a, b []byte)) {
	f := comb
	if len(src) == 2 {
		f = last
	}
	f(res, src[0].b[off:e], src[1].b[off:e])
	for k, s := range src[2:] {
		if k == len(src)-3 {
			f = last
		}
		f(res, res, s.b[off:e])
	}
}

// tbBufs are the block buffers of one thread block's reductions and
// packets. They belong to the session (session.bufs, by vector-clock
// thread) and are made on first use, so that a launch allocates none
// once every thread block has run a reduction (launches never overlap).
type tbBufs struct {
	acc, tmp []byte
	f32      []float32 // a run of fp16/bf16 sums (sum.go)
	// parts are the buffers of the other parts of a split reduce op
	// (sum_split.go).
	parts []*tbBufs
}

func (b *tbBufs) f32Buf() []float32 {
	if b.f32 == nil {
		b.f32 = make([]float32, sumRun)
	}
	return b.f32
}

func (b *tbBufs) accBuf(n int) []byte {
	if b.acc == nil {
		b.acc = make([]byte, bufBlock)
	}
	return b.acc[:n]
}

func (t *tbRun) accBuf(n int) []byte { return t.bufs.accBuf(n) }

func (t *tbRun) tmpBuf(n int) []byte {
	if t.bufs.tmp == nil {
		t.bufs.tmp = make([]byte, bufBlock)
	}
	return t.bufs.tmp[:n]
}

// overlap reports whether two byte slices share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// same reports whether two byte slices are the same memory.
func same(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b))
}
