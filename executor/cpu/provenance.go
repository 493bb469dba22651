package cpu

// provenance.go explains wrong data. Provenance runs one launch with a log
// of every data movement attached to the session: which op, on which rank
// and thread block, read which bytes and wrote which (a reduction: which
// sources it summed), in the order the movements completed. Nothing is
// logged in ordinary launches (the hooks are methods on a nil *provLog),
// so the cost is paid only by the re-run of a size whose check failed.
//
// From the log, Explain walks back from an output element to the input
// elements that reached it (its contributions, with the ops they came
// through) and, for each expected contribution that did not arrive,
// forward from that input element to the op that moved it last, choosing
// the op nearest to what the output was built from.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// maxTraceNodes bounds the backward walk of one element.
const maxTraceNodes = 1 << 14

// pspan is one operand of a logged movement: payload bytes [0, n) of a
// raw or LL packet region at addr (rank's buffer bt at byte off).
type pspan struct {
	rank   int
	bt     plan.BufferType
	off    uint64
	addr   uintptr
	n      uint64 // payload bytes
	packet bool
}

func toPspan(sp span, packet bool) pspan {
	p := pspan{rank: sp.rank, bt: sp.bt, off: sp.off, n: uint64(len(sp.b)), packet: packet}
	if len(sp.b) > 0 {
		p.addr = uintptr(unsafe.Pointer(unsafe.SliceData(sp.b)))
	}
	if packet {
		p.n /= 2
	}
	return p
}

// at returns the address and the buffer offset of payload byte j: in a
// packet region every 4-byte payload word is the low half of an 8-byte
// {data, flag} word.
func (p pspan) at(j uint64) (uintptr, uint64) {
	rel := j
	if p.packet {
		rel = 8*(j/4) + j%4
	}
	return p.addr + uintptr(rel), p.off + rel
}

// index returns the payload byte of p stored at address a, if any.
func (p pspan) index(a uintptr) (uint64, bool) {
	if a < p.addr {
		return 0, false
	}
	rel := uint64(a - p.addr)
	if !p.packet {
		return rel, rel < p.n
	}
	if rel%8 >= 4 || rel >= 2*p.n {
		return 0, false
	}
	return rel/8*4 + rel%8, true
}

// provEntry is one logged movement: payload byte j of every destination
// receives payload byte j of the source (or, reduce, the sum of byte j of
// every source).
type provEntry struct {
	rank, tb   int
	op         *executor.OpInstance
	iter       int
	proxy      bool
	srcs, dsts []pspan
	reduce     bool
}

// provLog is the movements of one launch in completion order.
type provLog struct {
	mu      sync.Mutex
	entries []provEntry
}

// add logs a movement of t's current op (nil log: nothing).
func (pl *provLog) add(t *tbRun, op *executor.OpInstance, srcs, dsts []span, srcPkt, dstPkt []bool, reduce bool) {
	if pl == nil {
		return
	}
	e := provEntry{rank: t.r.id, tb: t.tb.ID, op: op, iter: int(t.iter.Load()), reduce: reduce}
	for i, s := range srcs {
		e.srcs = append(e.srcs, toPspan(s, srcPkt != nil && srcPkt[i]))
	}
	for i, d := range dsts {
		e.dsts = append(e.dsts, toPspan(d, dstPkt != nil && dstPkt[i]))
	}
	pl.mu.Lock()
	pl.entries = append(pl.entries, e)
	pl.mu.Unlock()
}

// data logs a completed data op of t with its resolved operands; port
// transfers are logged by the proxy that performs them (transfer).
func (pl *provLog) data(t *tbRun, op *executor.OpInstance, sp *opSpans) {
	if pl == nil {
		return
	}
	flags := func(n int, v bool) []bool {
		f := make([]bool, n)
		for i := range f {
			f[i] = v
		}
		return f
	}
	switch ty := op.Type; {
	case ty == plan.OpCopy, ty == plan.OpGet, ty.Family() == plan.FamPut && !ty.Packet(): // pairwise copies
		if op.ChannelType == plan.Port && ty != plan.OpCopy && ty != plan.OpGet {
			return
		}
		for i := range sp.dst {
			pl.add(t, op, sp.src[i:i+1], sp.dst[i:i+1], nil, nil, false)
		}
	case ty.ReducesElements(): // reductions of elements
		pl.add(t, op, sp.src, sp.dst, nil, nil, true)
	case ty == plan.OpMultiStore:
		pl.add(t, op, sp.src[:1], sp.dst, nil, nil, false)
	case ty == plan.OpPutPacket:
		if op.ChannelType == plan.Port {
			return
		}
		for i := range sp.dst {
			pl.add(t, op, sp.src[i:i+1], sp.dst[i:i+1], nil, []bool{true}, false)
		}
	case ty == plan.OpReadPutPacket:
		if op.ChannelType == plan.Port {
			return
		}
		pl.packets(t, op, &sp.pk, flags)
	default:
		pl.packets(t, op, &sp.pk, flags)
	}
}

// packets logs a packet op: the packet sources, then the raw one, summed
// when the op reduces.
func (pl *provLog) packets(t *tbRun, op *executor.OpInstance, p *pktPlan, flags func(int, bool) []bool) {
	srcs := append(slices.Clone(p.pktIn), p.rawIn...)
	srcPkt := append(flags(len(p.pktIn), true), flags(len(p.rawIn), false)...)
	dsts := append(slices.Clone(p.rawOut), p.pktOut...)
	dstPkt := append(flags(len(p.rawOut), false), flags(len(p.pktOut), true)...)
	if !p.reduce && len(srcs) > 1 {
		srcs, srcPkt = srcs[:1], srcPkt[:1]
	}
	pl.add(t, op, srcs, dsts, srcPkt, dstPkt, p.reduce)
}

// transfer logs a port DATA transfer done by a rank's proxy.
func (pl *provLog) transfer(tr *trigger) {
	if pl == nil || tr.from == nil {
		return
	}
	e := provEntry{rank: tr.from.r.id, tb: tr.from.tb.ID, op: tr.opi, iter: -1, proxy: true,
		srcs: []pspan{toPspan(tr.src, false)}, dsts: []pspan{toPspan(tr.dst, false)}}
	pl.mu.Lock()
	pl.entries = append(pl.entries, e)
	pl.mu.Unlock()
}

// Place is an element of a rank's buffer.
type Place struct {
	Rank   int
	Buffer plan.BufferType
	Offset uint64
}

func (p Place) String() string {
	return fmt.Sprintf("rank %d %s[%d]", p.Rank, p.Buffer.Name(), p.Offset)
}

// Step is one logged movement: the op (with its thread block and
// pipeline iteration) and the element it wrote.
type Step struct {
	Rank, TB int
	Op       *executor.OpInstance
	Iter     int
	Proxy    bool // a port transfer, done by the rank's proxy
	Read     Place
	Wrote    Place
}

// Contribution is an input element.
type Contribution = executor.Contribution

// Arrival is one way a contribution reached the explained element: the
// steps from the input element to the element, in execution order.
type Arrival struct {
	From Contribution
	Path []Step
}

// Miss is an expected contribution that did not arrive, and the op that
// should have brought it.
type Miss struct {
	Want Contribution
	// How says why Step is named: "hole" (Step wrote Near's peer, buffer
	// or offset: Near is an element the result read that nothing wrote),
	// "elsewhere" (Step read Near, an element the result was built from,
	// but wrote elsewhere), "last" (Step moved the contribution last: its
	// last move to the explained element's rank, if any),
	// "overwritten" (Step wrote over the input element before any op
	// read it), or "unread" (no op read the input element; Step is nil).
	How  string
	Step *Step
	Near Place
}

// Explanation is the provenance of one output element.
type Explanation struct {
	Element  Place
	Arrivals []Arrival
	// Holes are elements the result read that no op wrote and that are
	// no input (stale scratch or output); HoleReaders[i] is the step
	// that read Holes[i] (Op nil when the explained element itself is
	// the hole: no op wrote it).
	Holes       []Place
	HoleReaders []Step
	Missing     []Miss
	// Extra are the arrivals beyond the expected ones: contributions not
	// expected, or arriving more often than expected.
	Extra []Arrival
	// Truncated is set when the walk stopped at maxTraceNodes.
	Truncated bool
}

// Prov is the log of one launch, with the buffers it ran on.
type Prov struct {
	entries []provEntry
	bufs    [][3][]byte
	elem    uint64
}

// Provenance opens a CPU session on inst, runs one launch on bufs (the
// first launch of a session) with the movement log on, and returns the
// log. The data results in bufs are those of an ordinary launch.
func Provenance(ctx context.Context, inst *executor.Instance, opts executor.Options, bufs []executor.RankBuffers) (*Prov, error) {
	s, err := open(inst, opts, schedule{})
	if err != nil {
		return nil, err
	}
	s.prov = &provLog{}
	err = s.Launch(ctx, bufs)
	p := &Prov{entries: s.prov.entries, elem: uint64(s.dt.Size())}
	for r := range bufs {
		p.bufs = append(p.bufs, [3][]byte{bufs[r].Input, bufs[r].Output, s.ranks[r].scratch})
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// input returns the input element at address a, if a is one.
func (p *Prov) input(a uintptr) (Contribution, bool) {
	for r, b := range p.bufs {
		in := b[0]
		if len(in) > 0 && a >= addrOf(in) && uint64(a-addrOf(in)) < uint64(len(in)) {
			return Contribution{Rank: r, Offset: uint64(a - addrOf(in))}, true
		}
	}
	return Contribution{}, false
}

// lastWriter returns the last entry before bound that wrote address a,
// with the payload byte and the destination that did.
func (p *Prov) lastWriter(a uintptr, bound int) (int, uint64, int) {
	for i := bound - 1; i >= 0; i-- {
		for k, d := range p.entries[i].dsts {
			if j, ok := d.index(a); ok {
				return i, j, k
			}
		}
	}
	return -1, 0, 0
}

func (e *provEntry) step(read pspan, dst pspan, j uint64) Step {
	_, roff := read.at(j)
	_, woff := dst.at(j)
	return Step{Rank: e.rank, TB: e.tb, Op: e.op, Iter: e.iter, Proxy: e.proxy,
		Read:  Place{Rank: read.rank, Buffer: read.bt, Offset: roff},
		Wrote: Place{Rank: dst.rank, Buffer: dst.bt, Offset: woff}}
}

// Explain walks back from rank's output element at byte off and compares
// the contributions that arrived with want, the expected ones.
func (p *Prov) Explain(rank int, off uint64, want []Contribution) *Explanation {
	x := &Explanation{Element: Place{Rank: rank, Buffer: plan.Output, Offset: off}}
	out := p.bufs[rank][1]
	read := map[uintptr][]span2{}
	nodes := 0
	var back func(a uintptr, at Place, bound int, path []Step)
	back = func(a uintptr, at Place, bound int, path []Step) {
		if nodes++; nodes > maxTraceNodes {
			x.Truncated = true
			return
		}
		i, j, k := p.lastWriter(a, bound)
		read[a] = append(read[a], span2{i, bound})
		if i < 0 {
			if c, ok := p.input(a); ok {
				rev := slices.Clone(path)
				slices.Reverse(rev)
				x.Arrivals = append(x.Arrivals, Arrival{From: c, Path: rev})
			} else if !slices.Contains(x.Holes, at) {
				x.Holes = append(x.Holes, at)
				var by Step
				if len(path) > 0 {
					by = path[len(path)-1]
				}
				x.HoleReaders = append(x.HoleReaders, by)
			}
			return
		}
		e := &p.entries[i]
		for _, s := range e.srcs {
			sa, soff := s.at(j)
			back(sa, Place{Rank: s.rank, Buffer: s.bt, Offset: soff}, i, append(path, e.step(s, e.dsts[k], j)))
		}
	}
	back(addrOf(out)+uintptr(off), x.Element, len(p.entries), nil)

	got := map[Contribution]int{}
	for _, a := range x.Arrivals {
		got[a.From]++
	}
	expect := map[Contribution]int{}
	for _, c := range want {
		expect[c]++
	}
	seen := map[Contribution]int{}
	for _, a := range x.Arrivals {
		seen[a.From]++
		if seen[a.From] > expect[a.From] {
			x.Extra = append(x.Extra, a)
		}
	}
	for _, c := range want {
		if got[c] < expect[c] {
			got[c]++ // one miss per missing arrival
			x.Missing = append(x.Missing, p.miss(c, x, read))
		}
	}
	return x
}

// span2 is the entries (lo, hi) that saw the value of an element the
// backward walk read: after its last writer lo, before the reader hi.
type span2 struct{ lo, hi int }

// sameValue reports whether entry i read the value of address a that the
// backward walk read.
func sameValue(read map[uintptr][]span2, a uintptr, i int) bool {
	for _, r := range read[a] {
		if r.lo < i && i < r.hi {
			return true
		}
	}
	return false
}

// move is a movement of a contribution: the step that moved it.
type move struct {
	entry int
	j     uint64
	step  Step
}

// miss follows contribution c forward through the log and names the op
// nearest to what the explained element was built from (read: the
// addresses its backward walk read, and when).
func (p *Prov) miss(c Contribution, x *Explanation, read map[uintptr][]span2) Miss {
	m := Miss{Want: c, How: "unread"}
	start := addrOf(p.bufs[c.Rank][0]) + uintptr(c.Offset)
	held := map[uintptr]Place{start: {Rank: c.Rank, Buffer: plan.Input, Offset: c.Offset}}
	var moves []move
	var overwrite *Step // the write over c before any op read it
	for i := range p.entries {
		e := &p.entries[i]
		// The payload bytes of e that carry c, and from where.
		carried := map[uint64]pspan{}
		for _, s := range e.srcs {
			for a := range held {
				if j, ok := s.index(a); ok {
					carried[j] = s
				}
			}
		}
		// Writes over held copies that do not carry c remove them.
		for _, d := range e.dsts {
			for a := range held {
				if j, ok := d.index(a); ok {
					if _, c := carried[j]; !c {
						delete(held, a)
						if len(moves) == 0 && len(e.srcs) > 0 {
							st := e.step(e.srcs[0], d, j)
							overwrite = &st
						}
					}
				}
			}
		}
		for _, j := range slices.Sorted(func(yield func(uint64) bool) {
			for j := range carried {
				if !yield(j) {
					return
				}
			}
		}) {
			for _, d := range e.dsts {
				a, off := d.at(j)
				held[a] = Place{Rank: d.rank, Buffer: d.bt, Offset: off}
				moves = append(moves, move{entry: i, j: j, step: e.step(carried[j], d, j)})
			}
		}
	}
	if len(moves) == 0 {
		if overwrite != nil {
			m.How, m.Step = "overwritten", overwrite
		}
		return m
	}
	// A hole the result read, and a move that wrote the same element of
	// another rank, the same buffer at another offset, or the same offset
	// of another buffer: the move went astray.
	best, bestScore := -1, 0
	for i, mv := range moves {
		for _, h := range x.Holes {
			w := mv.step.Wrote
			score := 0
			switch {
			case w == h:
			case w.Rank != h.Rank && w.Buffer == h.Buffer && w.Offset == h.Offset:
				score = 3
			case w.Rank == h.Rank && w.Buffer == h.Buffer:
				score = 2
			case w.Rank == h.Rank && w.Offset == h.Offset:
				score = 2
			}
			if score >= bestScore && score > 0 {
				best, bestScore, m.Near = i, score, h
			}
		}
	}
	if best >= 0 {
		m.How, m.Step = "hole", &moves[best].step
		return m
	}
	// A move that read an element the result was built from, but wrote
	// elsewhere.
	for i := len(moves) - 1; i >= 0; i-- {
		idx := moves[i].entry
		e := &p.entries[idx]
		j := moves[i].j
		wroteRead := false
		for _, d := range e.dsts {
			a, _ := d.at(j)
			wroteRead = wroteRead || len(read[a]) > 0
		}
		if wroteRead {
			continue
		}
		for _, s := range e.srcs {
			if a, off := s.at(j); sameValue(read, a, idx) {
				m.How, m.Step, m.Near = "elsewhere", &moves[i].step, Place{Rank: s.rank, Buffer: s.bt, Offset: off}
				return m
			}
		}
	}
	// The last move to the explained element's rank, else the last.
	m.How, m.Step = "last", &moves[len(moves)-1].step
	for i := len(moves) - 1; i >= 0; i-- {
		if moves[i].step.Wrote.Rank == x.Element.Rank {
			m.Step = &moves[i].step
			break
		}
	}
	return m
}

// Readers counts the logged movements that read place pl (any payload
// byte at its address): more than one for an element that several ops
// consume.
func (p *Prov) Readers(pl Place) int {
	if pl.Rank < 0 || pl.Rank >= len(p.bufs) {
		return 0
	}
	var b []byte
	switch pl.Buffer {
	case plan.Input:
		b = p.bufs[pl.Rank][0]
	case plan.Output:
		b = p.bufs[pl.Rank][1]
	case plan.Scratch:
		b = p.bufs[pl.Rank][2]
	}
	if pl.Offset >= uint64(len(b)) {
		return 0
	}
	a := addrOf(b) + uintptr(pl.Offset)
	n := 0
	for i := range p.entries {
		for _, s := range p.entries[i].srcs {
			if _, ok := s.index(a); ok {
				n++
				break
			}
		}
	}
	return n
}
