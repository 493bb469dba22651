//go:build cgo

package emu

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/plan"
)

// trafficOf runs one launch of c (float16) on a new emulated device that
// counts data traffic and returns the traffic placed on the plan's ops.
func trafficOf(t *testing.T, c trafficCase) []gpu.OpTraffic {
	t.Helper()
	p, err := executor.LoadFile(filepath.Join("..", "..", "tests", "ports", "single_node", c.plan+".plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := executor.PlanLayout(p, c.size, executor.Float16, p.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(p, l.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	var dev gpu.Driver
	cfg := gpu.Config{Name: "gpu-emu", Threads: c.threads, Open: func() (gpu.Driver, error) {
		d, err := Open()
		if err != nil {
			return nil, err
		}
		dev = d
		return d, CountTraffic(d)
	}}
	s, err := gpu.New(cfg).Open(inst, executor.Options{DType: executor.Float16, LL8: c.ll8, DeadlockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Launch(context.Background(), l.Alloc()); err != nil {
		t.Fatal(err)
	}
	counts, err := Traffic(dev)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := gpu.PlaceTraffic(inst, counts)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// trafficCase is a plan of tests/ports/single_node run at size bytes with
// threads per block (8 ranks' grids fit MaxThreads at 128).
type trafficCase struct {
	plan    string
	size    uint64
	threads int
	ll8     bool
}

// simpleData reports whether ops of type t move data with the Simple
// protocol's loops (copies and reductions, not LL packets).
func simpleData(op *executor.OpInstance) bool {
	return op.Type.IsData() && !op.Type.Packet() && !op.Type.UsesPort(op.ChannelType)
}

// TestTraffic runs copy and reduction plans at 1 MiB on the emulated
// device with traffic counted and requires, op by op, that no op moves
// more data than the plan requires and that an op off the port proxy
// moves exactly that; and, per op type, that the Simple protocol's
// copies and reductions reach 90% sector efficiency (they reach 100%:
// a warp's 16-byte vectors are adjacent).
func TestTraffic(t *testing.T) {
	cases := []trafficCase{
		{plan: "allgather", size: 1 << 20, threads: 1024},
		{plan: "allreduce_pipeline", size: 1 << 20, threads: 1024},
		{plan: "allreduce", size: 1 << 20, threads: 128},
		{plan: "allreduce_nvls_zero_copy", size: 1 << 20, threads: 128},
		{plan: "allreduce_naivy", size: 1 << 20, threads: 1024},
	}
	for _, c := range cases {
		t.Run(c.plan, func(t *testing.T) {
			ops := trafficOf(t, c)
			var simple int
			for _, ty := range sumByType(ops) {
				t.Logf("%-12s moved %10d of %10d required, polled %8d, %7d requests, sector efficiency %.3f",
					ty.Op.Type, ty.Moved(), ty.Required, ty.Polled, ty.Requests, ty.Efficiency())
				if simpleData(ty.Op) && ty.Required > 0 {
					simple++
					if ty.Efficiency() < 0.9 {
						t.Errorf("%s: sector efficiency %.3f (%d sectors for %d), want at least 0.9", ty.Op.Type,
							ty.Efficiency(), ty.Sectors, ty.MinSectors)
					}
				}
			}
			if c.plan != "allreduce_naivy" && simple == 0 {
				t.Fatal("no copy or reduction op counted")
			}
			for _, o := range ops {
				if o.Moved() > o.Required {
					t.Errorf("rank %d tb %d %s %s: moved %d bytes, the plan requires %d", o.Rank, o.TB, o.Op.Path, o.Op.Type,
						o.Moved(), o.Required)
				}
				if o.Op.Type.IsData() && !o.Op.Type.UsesPort(o.Op.ChannelType) && o.Moved() != o.Required {
					t.Errorf("rank %d tb %d %s %s: moved %d bytes, the plan requires %d: the counters missed some",
						o.Rank, o.TB, o.Op.Path, o.Op.Type, o.Moved(), o.Required)
				}
			}
		})
	}
}

// TestTrafficSeesStride: the counters tell a strided access from a
// coalesced one. An LL16 packet op reads (unpkt: writes) its raw side as
// two 4-byte words per 8-byte payload, so each such warp-wide access
// spans 8 sectors for 4 sectors of data, while its 16-byte packets are
// adjacent: 24 sectors' worth in 32 per packet round, 0.75. With LL8
// the raw side is one 4-byte word per packet and every access is
// coalesced. (When the kernel reads a payload with one 8-byte access,
// LL16 reaches 1 too and this test's expectation changes with it.)
func TestTrafficSeesStride(t *testing.T) {
	for _, c := range []struct {
		ll8  bool
		want float64
	}{{false, 0.75}, {true, 1}} {
		ops := trafficOf(t, trafficCase{plan: "allreduce_naivy", size: 1 << 20, threads: 1024, ll8: c.ll8})
		for _, ty := range sumByType(ops) {
			if ty.Op.Type != plan.OpUnpackPacket && ty.Op.Type != plan.OpPutPacket {
				continue
			}
			if math.Abs(ty.Efficiency()-c.want) > 1e-9 {
				t.Errorf("LL8 %v %s: sector efficiency %.4f (%d of %d sectors), want %.2f", c.ll8, ty.Op.Type,
					ty.Efficiency(), ty.MinSectors, ty.Sectors, c.want)
			}
		}
	}
}

// sumByType adds the traffic of ops up per op type (and channel type),
// in the order the types first appear.
func sumByType(ops []gpu.OpTraffic) []*gpu.OpTraffic {
	type key struct {
		t  plan.OpType
		ct plan.ChannelType
	}
	by := map[key]*gpu.OpTraffic{}
	var order []*gpu.OpTraffic
	for _, o := range ops {
		k := key{o.Op.Type, o.Op.ChannelType}
		a := by[k]
		if a == nil {
			a = &gpu.OpTraffic{Op: o.Op}
			by[k] = a
			order = append(order, a)
		}
		a.Required += o.Required
		a.TrafficCount.Add(o.TrafficCount)
	}
	return order
}
