package cpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// f32 is a test-only float32 DType (IEEE binary32, round to nearest even
// after every addition).
type f32 struct{}

func (f32) Name() string { return "float" }
func (f32) Size() int    { return 4 }
func (f32) Add(dst, a, b []byte) {
	for i := 0; i+4 <= len(dst); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(a[i:]))
		y := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(x+y))
	}
}

// negZero is -0.0 (the constant -0.0 is +0 in Go).
var negZero = float32(math.Copysign(0, -1))

// floats encodes float32 values.
func floats(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// fill returns n float32 values a, a+step, …
func fill(n int, a, step float32) []byte {
	v := make([]float32, n)
	for i := range v {
		v[i] = a + step*float32(i)
	}
	return floats(v...)
}

// pattern returns n bytes that differ per seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed*31 + 1
	}
	return b
}

// builder assembles an Instance by hand.
type builder struct {
	inst *executor.Instance
}

const local = -2 // Region.Rank placeholder: the executing rank

func newBuilder(nranks int, scratch uint64) *builder {
	inst := &executor.Instance{
		Plan:         &plan.Plan{Name: "test", Protocol: "Simple", BufferAlignment: 16},
		ScratchBytes: scratch,
		Ranks:        make([]executor.RankInstance, nranks),
	}
	for r := range inst.Ranks {
		inst.Ranks[r].Rank = r
		inst.Plan.GPUs = append(inst.Plan.GPUs, plan.GPU{ID: r})
	}
	return &builder{inst: inst}
}

func (b *builder) chans(r int, t plan.ChannelType) *[]executor.ChannelEnd {
	if t == plan.Port {
		return &b.inst.Ranks[r].PortChannels
	}
	return &b.inst.Ranks[r].MemoryChannels
}

// connect pairs a new channel of type t on x with a new one on y and
// returns their global indices.
func (b *builder) connect(t plan.ChannelType, x, y int) (int, int) {
	cx, cy := b.chans(x, t), b.chans(y, t)
	ix := len(*cx)
	*cx = append(*cx, executor.ChannelEnd{Peer: y})
	iy := len(*cy)
	if x == y {
		iy = ix + 1
	}
	*cy = append(*cy, executor.ChannelEnd{Peer: x})
	(*cx)[ix].PeerIndex = iy
	(*cy)[iy].PeerIndex = ix
	return ix, iy
}

// unpaired adds a channel on x to y that y does not declare.
func (b *builder) unpaired(t plan.ChannelType, x, y int) int {
	cx := b.chans(x, t)
	*cx = append(*cx, executor.ChannelEnd{Peer: y, PeerIndex: -1})
	return len(*cx) - 1
}

// group adds a switch channel over ranks bound to bt on every member and
// returns its index (the same on all members when groups are added in the
// same order).
func (b *builder) group(bt plan.BufferType, ranks ...int) int {
	idx := -1
	for _, r := range ranks {
		ri := &b.inst.Ranks[r]
		ri.Switches = append(ri.Switches, plan.SwitchGroup{Buffer: bt, Ranks: ranks})
		idx = len(ri.Switches) - 1
	}
	return idx
}

func (b *builder) sems(r int, init ...int64) {
	b.inst.Ranks[r].Semaphores = append(b.inst.Ranks[r].Semaphores, init...)
}

// tb appends a thread block to rank r: positions and paths are filled in,
// local regions get rank r.
func (b *builder) tb(r int, ops ...executor.OpInstance) int {
	ri := &b.inst.Ranks[r]
	fix(r, ops, "op ")
	ri.TBs = append(ri.TBs, executor.TBInstance{ID: len(ri.TBs), Ops: ops})
	return len(ri.TBs) - 1
}

func fix(r int, ops []executor.OpInstance, prefix string) {
	for i := range ops {
		op := &ops[i]
		op.Index = i
		op.Path = fmt.Sprintf("%s%d", prefix, i)
		for _, rs := range [][]executor.Region{op.Src, op.Dst} {
			for k := range rs {
				if rs[k].Rank == local {
					rs[k].Rank = r
				}
			}
		}
		fix(r, op.Body, op.Path+".")
	}
}

// Regions.
func L(bt plan.BufferType, off, size uint64) executor.Region {
	return executor.Region{Rank: local, Buffer: bt, Offset: off, Size: size, Switch: -1}
}

func R(rank int, bt plan.BufferType, off, size uint64) executor.Region {
	return executor.Region{Rank: rank, Buffer: bt, Offset: off, Size: size, Switch: -1}
}

func SW(sw int, bt plan.BufferType, off, size uint64) executor.Region {
	return executor.Region{Rank: -1, Buffer: bt, Offset: off, Size: size, Switch: sw}
}

const (
	in  = plan.Input
	out = plan.Output
	scr = plan.Scratch
	mem = plan.Memory
	prt = plan.Port
)

// Ops.
func op(t plan.OpType, ct plan.ChannelType, chs []int, src, dst []executor.Region) executor.OpInstance {
	return executor.OpInstance{Type: t, ChannelType: ct, Channels: chs, Src: src, Dst: dst}
}

func rs(r ...executor.Region) []executor.Region { return r }
func ch(c ...int) []int                         { return c }

func cp(src, dst executor.Region) executor.OpInstance {
	return op(plan.OpCopy, plan.NoChannel, nil, rs(src), rs(dst))
}

func sig(ct plan.ChannelType, c ...int) executor.OpInstance {
	return op(plan.OpSignal, ct, c, nil, nil)
}

func wt(ct plan.ChannelType, c ...int) executor.OpInstance {
	return op(plan.OpWait, ct, c, nil, nil)
}

func nop() executor.OpInstance { return executor.OpInstance{Type: plan.OpNop} }

func bar(id, n int) executor.OpInstance {
	return executor.OpInstance{Type: plan.OpBarrier, BarrierID: id, NumThreadBlocks: n}
}

func sem(t plan.OpType, ids ...int) executor.OpInstance {
	return executor.OpInstance{Type: t, Semaphores: ids}
}

func pipe(unit uint64, iters int, body ...executor.OpInstance) executor.OpInstance {
	return executor.OpInstance{Type: plan.OpPipeline, UnitSize: unit, Iterations: iters, Body: body}
}

// bufs allocates per-rank buffers; inputs get pattern data.
func bufs(nranks, inBytes, outBytes int) []executor.RankBuffers {
	b := make([]executor.RankBuffers, nranks)
	for r := range b {
		b[r].Input = pattern(inBytes, byte(r))
		b[r].Output = make([]byte, outBytes)
	}
	return b
}

func opts() executor.Options {
	return executor.Options{DType: f32{}, DeadlockTimeout: 5 * time.Second}
}

// openT opens inst with the test scheduling knob or fails the test.
func openT(t testing.TB, inst *executor.Instance, o executor.Options, sch schedule) *session {
	t.Helper()
	s, err := open(inst, o, sch)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// run opens inst and launches it once.
func run(t testing.TB, inst *executor.Instance, o executor.Options, b []executor.RankBuffers) (*session, error) {
	t.Helper()
	s := openT(t, inst, o, schedule{})
	return s, s.Launch(context.Background(), b)
}

func mustRun(t testing.TB, inst *executor.Instance, o executor.Options, b []executor.RankBuffers) *session {
	t.Helper()
	s, err := run(t, inst, o, b)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	return s
}

func eq(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if string(got) != string(want) {
		n := 0
		for n < len(got) && n < len(want) && got[n] == want[n] {
			n++
		}
		t.Errorf("%s: differs at byte %d (len got %d, want %d)\n got  %x\n want %x", what, n, len(got), len(want), clip(got[min(n, len(got)):]), clip(want[min(n, len(want)):]))
	}
}

func clip(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

func cat(bs ...[]byte) []byte {
	var o []byte
	for _, b := range bs {
		o = append(o, b...)
	}
	return o
}

// sum32 is the float32 sum of equally long value slices, in order
// ((a ⊕ b) ⊕ c)….
func sum32(bs ...[]byte) []byte {
	o := append([]byte(nil), bs[0]...)
	for _, b := range bs[1:] {
		f32{}.Add(o, o, b)
	}
	return o
}
