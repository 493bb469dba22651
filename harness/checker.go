package harness

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// maxSizeTries bounds the consecutive multiples of a plan's size unit
// CheckSizes tries when it looks for valid sizes off the power-of-two
// ladder.
const maxSizeTries = 64

// CheckSizes returns up to n distinct message sizes (ascending) that are
// valid for plan: inside [MinMessageSize, MaxMessageSize], divisible as
// its chunking needs, and accepted by CheckLaunch. The first is the
// smallest valid size. The others prefer sizes of at most maxBytes: when
// the ladder unit·2^k holds enough valid sizes up to maxBytes, n = 3
// gives the smallest valid, a middle and the largest ladder size up to
// maxBytes. Otherwise (a narrow range, or
// one starting above maxBytes) the ladder sizes up to maxBytes are kept
// and the next valid sizes above the smallest one, in steps of the size
// unit, fill up to n: a plan whose range starts at 2 MiB + 1 is validated
// at the three smallest valid sizes above 2 MiB, never above its
// MaxMessageSize.
func CheckSizes(p *plan.Plan, dt executor.ElemType, maxBytes uint64, n int) []uint64 {
	if n <= 0 {
		return nil
	}
	unit := sizeUnit(p, dt)
	const top = uint64(1) << 40
	valid := func(s uint64) bool {
		if s < p.MinMessageSize || s > p.MaxMessageSize || s > top {
			return false
		}
		l, err := PlanLayout(p, s, dt, p.Inplace)
		if err != nil {
			return false
		}
		inst, err := executor.Instantiate(p, l.Sizes)
		return err == nil && executor.CheckLaunch(inst, l.BufferLayout, false) == nil
	}
	// The smallest valid size: the first valid multiple of unit in range.
	lo := max(p.MinMessageSize, unit)
	if r := lo % unit; r != 0 {
		lo += unit - r
	}
	first := uint64(0)
	for s, i := lo, 0; i < maxSizeTries && s >= lo && s <= p.MaxMessageSize && s <= top; s, i = s+unit, i+1 {
		if valid(s) {
			first = s
			break
		}
	}
	if first == 0 {
		return nil
	}
	sizes := []uint64{first}
	for s := unit; s != 0 && s <= maxBytes && s <= top; s *= 2 {
		if s > first && valid(s) {
			sizes = append(sizes, s)
		}
	}
	if len(sizes) >= n {
		if n <= 3 {
			out := []uint64{sizes[0], sizes[len(sizes)/2], sizes[len(sizes)-1]}
			return out[:n]
		}
		out := make([]uint64, n)
		for i := range out {
			out[i] = sizes[i*(len(sizes)-1)/(n-1)]
		}
		return out
	}
	// Too few ladder sizes up to maxBytes: add the next valid sizes above
	// the smallest, in steps of unit.
	have := map[uint64]bool{}
	for _, s := range sizes {
		have[s] = true
	}
	var extra []uint64
	for s, i := first+unit, 0; i < maxSizeTries && len(sizes)+len(extra) < n && s > first; s, i = s+unit, i+1 {
		if have[s] {
			continue
		}
		if !valid(s) {
			if s > p.MaxMessageSize || s > top {
				break
			}
			continue
		}
		extra = append(extra, s)
	}
	out := append(sizes, extra...)
	slices.Sort(out)
	return out
}

// sizeUnit is the smallest message size worth trying: the alignment times
// the chunk counts and the rank count, so that every buffer divides.
func sizeUnit(p *plan.Plan, dt executor.ElemType) uint64 {
	a := p.BufferAlignment
	if a == 0 {
		a = 16
	}
	u := lcm(a, uint64(dt.Size()))
	for _, g := range p.GPUs {
		for _, c := range []int{g.InputChunks, g.OutputChunks} {
			if c > 0 {
				u = lcm(u, a*uint64(c))
			}
		}
	}
	return lcm(u, a*uint64(len(p.GPUs)))
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b uint64) uint64 { return a / gcd(a, b) * b }

// Checker is the data of Run (Config.Checker): it draws the inputs of
// every launch and the expected results from data it generates once and keeps:
// the fill of executor_test.py is deterministic, so the inputs of every
// rank and iteration, at every message size, are windows of one generator
// table per element type and fill mode, and the reference sums are
// windows of one table per rank count. Validating many plans (of one
// collective or not) with one Checker generates their data once. A
// Checker is safe for concurrent use; its memory grows with the largest
// message size it has served (a few times that size per rank count), not
// with the number of ranks, iterations or runs.
type Checker struct {
	mu   sync.Mutex
	gens map[genKey]*genTable
	sums map[sumKey]*genTable
}

type genKey struct {
	dtype string
	mode  FillMode
}

type sumKey struct {
	genKey
	nranks, splitMask int
	op                executor.ReduceOp
}

// genTable holds rows of generator output laid out thread-major, as Fill
// writes them, but wider: row k holds, for generator threads t in [0,
// width), the value thread t stores at its k-th step (or the rank-order
// sum of such values, for a sum table). The fill of seed base b (rank +
// iteration) is then element i ↦ row i/fillThreads, column
// i%fillThreads + b: thread g of base b starts at seed g + b, as thread
// g + b of base 0 does. A table is never modified once built.
type genTable struct {
	es    int    // element size in bytes
	rows  int    // rows held
	width int    // elements per row: fillThreads + the largest shift served
	data  []byte // rows × width elements
}

// The columns a generator table and a sum table keep beyond the largest
// shift served so far, so that the next launches need no new table.
const (
	genHeadroom = 64
	sumHeadroom = 8
)

// NewChecker returns an empty Checker.
func NewChecker() *Checker {
	return &Checker{gens: map[genKey]*genTable{}, sums: map[sumKey]*genTable{}}
}

// covers reports whether t serves n elements at shifts up to shift.
func (t *genTable) covers(n, shift int) bool {
	return t != nil && t.rows*fillThreads >= n && t.width-fillThreads >= shift
}

// each calls f with consecutive pieces of elements [lo, hi) of the
// logical array at shift, and the element offset of each piece from lo.
func (t *genTable) each(shift, lo, hi int, f func(piece []byte, at int)) {
	for i := lo; i < hi; {
		row, col := i/fillThreads, i%fillThreads
		n := min(hi-i, fillThreads-col)
		off := (row*t.width + col + shift) * t.es
		f(t.data[off:off+n*t.es], i-lo)
		i += n
	}
}

// rowsFor is the number of generator rows n elements span.
func rowsFor(n int) int { return (n + fillThreads - 1) / fillThreads }

// gen returns the generator table of dt and mode serving n elements at
// shifts up to shift (c.mu held).
func (c *Checker) gen(dt executor.Numeric, mode FillMode, n, shift int) (*genTable, error) {
	k := genKey{dt.Name(), mode}
	t := c.gens[k]
	if t.covers(n, shift) {
		return t, nil
	}
	rows, ext := rowsFor(n), shift
	if t != nil {
		rows, ext = max(rows, t.rows), max(ext, t.width-fillThreads)
	}
	// Leave room for the shifts of a few more ranks and iterations, so
	// that a table is rebuilt rarely (every genHeadroom launches at most).
	ext = max(ext, shift+genHeadroom)
	t, err := buildGen(dt, mode, rows, fillThreads+ext)
	if err != nil {
		return nil, err
	}
	c.gens[k] = t
	return t, nil
}

// buildGen computes rows × width generator values, as FillWith does for
// its fillThreads threads.
func buildGen(dt executor.Numeric, mode FillMode, rows, width int) (*genTable, error) {
	es := dt.Size()
	if es != 2 && es != 4 {
		return nil, fmt.Errorf("checker: fill of %d-byte %s elements", es, dt.Name())
	}
	tab := make([]byte, 1024*es)
	for k := 0; k < 1024; k++ {
		v := float64(k) / 1024
		if mode == IntegerFill && dt.Epsilon() == 0 {
			v = float64(k)
		}
		dt.SetFloat64(tab, k, v)
	}
	t := &genTable{es: es, rows: rows, width: width, data: make([]byte, rows*width*es)}
	seeds := make([]uint32, width)
	for g := range seeds {
		seeds[g] = uint32(g)
	}
	for row := 0; row < rows; row++ {
		out := t.data[row*width*es : (row+1)*width*es]
		for g, s := range seeds {
			s = s*1664525 + 1013904223
			seeds[g] = s
			k := int(s%1024) * es
			if es == 2 {
				binary.LittleEndian.PutUint16(out[2*g:], binary.LittleEndian.Uint16(tab[k:]))
			} else {
				binary.LittleEndian.PutUint32(out[4*g:], binary.LittleEndian.Uint32(tab[k:]))
			}
		}
	}
	return t, nil
}

// sum returns the reference-sum table of l's element type, fill mode,
// rank count, split mask and reduction serving n elements at shifts
// (iterations) up to shift: column t of a row is the reduction (the sum,
// for ReduceSum), in rank order, of the generator values at t +
// seedRank(r) (c.mu held).
func (c *Checker) sum(l *Layout, n, shift int) (*genTable, error) {
	k := sumKey{genKey{l.DType.Name(), l.Fill}, l.NRanks, l.SplitMask, l.Reduce}
	comb := l.combine()
	if comb == nil {
		return nil, fmt.Errorf("check: %w", executor.CheckReduce(l.DType, l.Reduce))
	}
	t := c.sums[k]
	if t.covers(n, shift) {
		return t, nil
	}
	rows, ext := rowsFor(n), shift
	if t != nil {
		rows, ext = max(rows, t.rows), max(ext, t.width-fillThreads)
	}
	ext = max(ext, shift+sumHeadroom)
	width := fillThreads + ext
	g, err := c.gen(l.DType, l.Fill, rows*fillThreads, ext+l.seedRank(l.NRanks-1))
	if err != nil {
		return nil, err
	}
	es := g.es
	t = &genTable{es: es, rows: rows, width: width, data: make([]byte, rows*width*es)}
	for row := 0; row < rows; row++ {
		acc := t.data[row*width*es : (row+1)*width*es]
		src := func(r int) []byte {
			off := (row*g.width + l.seedRank(r)) * es
			return g.data[off : off+width*es]
		}
		copy(acc, src(0))
		for r := 1; r < l.NRanks; r++ {
			comb(acc, acc, src(r))
		}
	}
	c.sums[k] = t
	return t, nil
}

// FillInputs fills every rank's input for iteration seq, as
// l.FillInputs does, from the Checker's data.
func (c *Checker) FillInputs(l *Layout, bufs []executor.RankBuffers, seq int) error {
	if len(bufs) == 0 {
		return nil
	}
	es := l.DType.Size()
	n := len(bufs[0].Input) / es
	maxShift := 0
	for r := range bufs {
		n = max(n, len(bufs[r].Input)/es)
		maxShift = max(maxShift, l.seedRank(r)+seq)
	}
	c.mu.Lock()
	g, err := c.gen(l.DType, l.Fill, n, maxShift)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	for r := range bufs {
		in := bufs[r].Input
		g.each(l.seedRank(r)+seq, 0, len(in)/es, func(piece []byte, at int) { copy(in[at*es:], piece) })
	}
	return nil
}

// FillRank fills rank's input for iteration seq, as l.FillRank does,
// from the Checker's data (a process that holds one rank of a run of one
// process per rank).
func (c *Checker) FillRank(l *Layout, in []byte, rank, seq int) error {
	es := l.DType.Size()
	c.mu.Lock()
	g, err := c.gen(l.DType, l.Fill, len(in)/es, l.seedRank(rank)+seq)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	g.each(l.seedRank(rank)+seq, 0, len(in)/es, func(piece []byte, at int) { copy(in[at*es:], piece) })
	return nil
}

// Check compares every rank's output after iteration seq with the
// expected result and returns the number of wrong elements per rank, as
// l.Check does, from the Checker's data.
func (c *Checker) Check(l *Layout, bufs []executor.RankBuffers, seq int) ([]uint64, error) {
	if len(bufs) != l.NRanks {
		return nil, fmt.Errorf("check: %d buffer sets for %d ranks", len(bufs), l.NRanks)
	}
	t, err := c.table(l, seq)
	if err != nil {
		return nil, err
	}
	wrong := make([]uint64, len(bufs))
	var wg sync.WaitGroup
	for me := range bufs {
		wg.Go(func() { wrong[me] = checkRank(l, t, bufs[me].Output, me, seq) })
	}
	wg.Wait()
	return wrong, nil
}

// CheckRank is Check for rank's output only (a process that holds one
// rank of a run of one process per rank): its wrong elements after
// iteration seq, ErrNoCheck without a defined result.
func (c *Checker) CheckRank(l *Layout, out []byte, rank, seq int) (uint64, error) {
	if rank < 0 || rank >= l.NRanks {
		return 0, fmt.Errorf("check: rank %d of %d", rank, l.NRanks)
	}
	t, err := c.table(l, seq)
	if err != nil {
		return 0, err
	}
	return checkRank(l, t, out, rank, seq), nil
}

// checkRank counts the elements of rank me's output out that differ from
// what the table t (Checker.table) says after iteration seq.
func checkRank(l *Layout, t *genTable, out []byte, me, seq int) uint64 {
	es := l.DType.Size()
	inE, outE := int(l.Sizes.Input)/es, int(l.Sizes.Output)/es
	n := l.NRanks
	// compare counts the elements of out[at:] that differ from elements
	// [lo, hi) of the table at shift.
	compare := func(shift, lo, hi int, out []byte, near bool) uint64 {
		var w uint64
		t.each(shift, lo, hi, func(piece []byte, at int) {
			got := out[at*es : at*es+len(piece)]
			if near {
				w += nearCount(l, got, piece)
			} else {
				w += l.exact(got, piece)
			}
		})
		return w
	}
	var wrong uint64
	switch l.Kind() {
	case executor.AllReduce:
		wrong = compare(seq, 0, outE, out, l.tolerant())
	case executor.ReduceScatter:
		wrong = compare(seq, me*outE, (me+1)*outE, out, l.tolerant())
	case executor.AllGather:
		for r := 0; r < n; r++ {
			wrong += compare(r+seq, 0, inE, out[r*inE*es:], false)
		}
	case executor.AllToAll:
		m := inE / n
		for r := 0; r < n; r++ {
			wrong += compare(r+seq, me*m, (me+1)*m, out[r*m*es:], false)
		}
	case executor.SendRecv:
		wrong = compare(l.prevGroup(me)+seq, 0, outE, out, false)
	}
	return wrong
}

// table returns the table the expected results of l after iteration seq
// are windows of: the reference sums for reductions, the generator
// otherwise.
func (c *Checker) table(l *Layout, seq int) (*genTable, error) {
	es := l.DType.Size()
	inE, outE := int(l.Sizes.Input)/es, int(l.Sizes.Output)/es
	c.mu.Lock()
	defer c.mu.Unlock()
	switch l.Kind() {
	case executor.AllReduce, executor.ReduceScatter:
		return c.sum(l, max(inE, outE), seq)
	case executor.AllGather, executor.AllToAll:
		return c.gen(l.DType, l.Fill, inE, l.NRanks-1+seq)
	case executor.SendRecv:
		if l.SplitMask < 0 || l.NRanks%(l.SplitMask+1) != 0 {
			return nil, fmt.Errorf("check: split mask %d does not group %d ranks evenly", l.SplitMask, l.NRanks)
		}
		return c.gen(l.DType, l.Fill, inE, l.NRanks/(l.SplitMask+1)-1+seq)
	}
	return nil, ErrNoCheck
}

// Expected is l.Expected from the Checker's data: what rank's output
// must hold after iteration seq, ErrNoCheck without a defined result.
func (c *Checker) Expected(l *Layout, rank, seq int) ([]byte, error) {
	if rank < 0 || rank >= l.NRanks {
		return nil, fmt.Errorf("check: rank %d of %d", rank, l.NRanks)
	}
	t, err := c.table(l, seq)
	if err != nil {
		return nil, err
	}
	es := l.DType.Size()
	inE, outE := int(l.Sizes.Input)/es, int(l.Sizes.Output)/es
	n := l.NRanks
	// copyOut copies elements [lo, hi) of the table at shift to dst.
	copyOut := func(shift, lo, hi int, dst []byte) {
		t.each(shift, lo, hi, func(piece []byte, at int) { copy(dst[at*es:], piece) })
	}
	var out []byte
	switch l.Kind() {
	case executor.AllReduce:
		out = make([]byte, outE*es)
		copyOut(seq, 0, outE, out)
	case executor.ReduceScatter:
		out = make([]byte, outE*es)
		copyOut(seq, rank*outE, (rank+1)*outE, out)
	case executor.AllGather:
		out = make([]byte, n*inE*es)
		for r := range n {
			copyOut(r+seq, 0, inE, out[r*inE*es:])
		}
	case executor.AllToAll:
		m := inE / n
		out = make([]byte, n*m*es)
		for r := range n {
			copyOut(r+seq, rank*m, (rank+1)*m, out[r*m*es:])
		}
	case executor.SendRecv:
		out = make([]byte, outE*es)
		copyOut(l.prevGroup(rank)+seq, 0, outE, out)
	}
	return out, nil
}

// Wrong is l.Wrong from the Checker's data: up to max elements of rank's
// output that Check counts as wrong after iteration seq, in offset
// order. It builds the expected output of that rank alone.
func (c *Checker) Wrong(l *Layout, bufs []executor.RankBuffers, seq, rank, max int) ([]WrongElement, error) {
	if rank < 0 || rank >= len(bufs) {
		return nil, fmt.Errorf("check: rank %d of %d buffer sets", rank, len(bufs))
	}
	want, err := c.Expected(l, rank, seq)
	if err != nil {
		return nil, err
	}
	return l.wrongIn(bufs[rank].Output, want, rank, max), nil
}

// nearCount is l.near(got, want) with the 16-bit floating-point types
// viewed as element slices (on a little-endian host, for aligned
// buffers): bit-identical elements are skipped without conversion, the
// others compared in float64 as l.near compares them.
func nearCount(l *Layout, got, want []byte) uint64 {
	dt, ok := l.DType.(executor.ElemType)
	if !ok || (dt != executor.Float16 && dt != executor.BFloat16) || !nativeLE || len(want) < 2 || len(got) < len(want) ||
		(uintptr(unsafe.Pointer(&got[0]))|uintptr(unsafe.Pointer(&want[0])))&1 != 0 {
		return l.near(got, want)
	}
	tol := dt.Epsilon() * float64(l.NRanks)
	w, g := view16(want), view16(got[:len(want)])
	var wrong uint64
	for i, x := range w {
		y := g[i]
		if x == y {
			continue
		}
		var o, e float64
		if dt == executor.Float16 {
			o, e = float64(executor.F16ToF32(y)), float64(executor.F16ToF32(x))
		} else {
			o, e = float64(math.Float32frombits(uint32(y)<<16)), float64(math.Float32frombits(uint32(x)<<16))
		}
		if !(math.Abs(o-e) <= tol*(1+math.Abs(e))) {
			wrong++
		}
	}
	return wrong
}

// nativeLE reports a little-endian host, where nearCount views the bytes
// as elements.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// view16 views b, 2-byte aligned, as 16-bit elements.
func view16(b []byte) []uint16 { return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2) }
