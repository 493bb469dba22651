package emit

import (
	"io"
	"math/big"
	"testing"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// synthetic builds a plan-shaped program of the given size: every rank has
// memory and port channels to every peer, a remote buffer per peer, and
// tbs thread blocks of opsPerTB ops cycling through the common kinds.
func synthetic(ranks, tbs, opsPerTB int) *ir.Program {
	p := &ir.Program{Name: "synthetic", Collective: "allreduce", Protocol: "Simple", Inplace: true,
		NumThreadsPerBlock: big.NewInt(1024), BufferAlignment: big.NewInt(16),
		MinMessageSize: big.NewInt(0), MaxMessageSize: new(big.Int).SetUint64(1<<64 - 1)}
	for r := 0; r < ranks; r++ {
		g := &ir.GPU{ID: r, InputChunks: ranks, OutputChunks: ranks, ScratchChunks: 2 * ranks}
		var peers []int
		for q := 0; q < ranks; q++ {
			if q != r {
				peers = append(peers, q)
				g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: q, Buffer: ir.Scratch, Memory: true})
			}
		}
		g.Channels = []ir.ChannelTable{{Type: ir.Memory, ConnectedTo: peers}, {Type: ir.Port, ConnectedTo: peers}}
		g.Semaphores = []*big.Int{big.NewInt(0)}
		for t := 0; t < tbs; t++ {
			tb := &ir.ThreadBlock{ID: t,
				Channels:   []ir.IDTable{{Type: ir.Memory, IDs: []int{t % len(peers), (t + 1) % len(peers)}}, {Type: ir.Port, IDs: []int{t % len(peers)}}},
				RemoteRefs: []ir.IDTable{{Type: ir.Memory, IDs: []int{t % len(peers)}}},
			}
			for i := 0; len(tb.Ops) < opsPerTB; i++ {
				c := (t + i) % ranks
				switch i % 8 {
				case 0:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpNop})
				case 1:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpSignal, IDSet: ir.NewSet(0, 1), ChannelType: ir.Memory})
				case 2:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpWait, IDSet: ir.NewSet(0), ChannelType: ir.Memory})
				case 3:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpPut, Src: []ir.Ref{{Buffer: ir.Input, Index: c, Size: 1}},
						Dst: []ir.Ref{{Remote: true, Index: ranks + c, Size: 1}}, ChannelIDs: []int{0}, ChannelType: ir.Memory})
				case 4:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpReadReduceSend,
						LocalSrc: []ir.Ref{{Buffer: ir.Input, Index: c, Size: 1}}, RemoteSrc: []ir.Ref{{Remote: true, Index: c, Size: 1}},
						LocalDst: []ir.Ref{{Buffer: ir.Input, Index: c, Size: 1}}, RemoteDst: []ir.Ref{{Remote: true, BufferID: 0, Index: c, Size: 1}},
						ChannelType: ir.Memory, TBG: &ir.TBGInfo{TBID: t % 4, TBGSize: 4}})
				case 5:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpCopy, Src: []ir.Ref{{Buffer: ir.Scratch, Index: c, Size: 1}},
						Dst: []ir.Ref{{Buffer: ir.Output, Index: c, Size: 1}}})
				case 6:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpPutWithSignal, Src: []ir.Ref{{Buffer: ir.Input, Index: c, Size: 1}},
						Dst: []ir.Ref{{Remote: true, Index: c, Size: 1}}, ChannelIDs: []int{0}, ChannelType: ir.Port})
				case 7:
					tb.Ops = append(tb.Ops, &ir.Op{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}})
				}
			}
			g.ThreadBlocks = append(g.ThreadBlocks, tb)
		}
		p.GPUs = append(p.GPUs, g)
	}
	return p
}

// BenchmarkWrite streams a synthetic 64-rank plan of about 14.5 MB (the size of the
// reference 64-rank allreduce plan) to
// io.Discard.
func BenchmarkWrite(b *testing.B) {
	p := synthetic(64, 16, 40)
	out, err := Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := Write(io.Discard, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshal builds the same plan in memory.
func BenchmarkMarshal(b *testing.B) {
	p := synthetic(64, 16, 40)
	out, err := Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Marshal(p); err != nil {
			b.Fatal(err)
		}
	}
}
