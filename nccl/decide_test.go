package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/planset"
)

func TestInPlaceAndSize(t *testing.T) {
	const base = 0x10000
	for _, c := range []struct {
		name    string
		k       call
		rank    int
		inPlace bool
		size    uint64
	}{
		{"allreduce same buffer", call{coll: collAllReduce, send: base, recv: base, count: 256, dtype: 7}, 1, true, 1024},
		{"allreduce two buffers", call{coll: collAllReduce, send: base, recv: base + 4096, count: 256, dtype: 7}, 1, false, 1024},
		{"allgather own slice", call{coll: collAllGather, send: base + 2*512, recv: base, count: 256, dtype: 6}, 2, true, 4 * 512},
		{"allgather another rank's slice", call{coll: collAllGather, send: base + 512, recv: base, count: 256, dtype: 6}, 2, false, 4 * 512},
		{"allgather same buffer, rank 1", call{coll: collAllGather, send: base, recv: base, count: 256, dtype: 6}, 1, false, 4 * 512},
		{"reducescatter own slice", call{coll: collReduceScatter, send: base, recv: base + 3*1024, count: 256, dtype: 9}, 3, false, 4 * 512},
		{"reducescatter own slice bf16", call{coll: collReduceScatter, send: base, recv: base + 3*512, count: 256, dtype: 9}, 3, true, 4 * 512},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.k.inPlace(c.rank); got != c.inPlace {
				t.Errorf("inPlace = %v, want %v", got, c.inPlace)
			}
			if got := c.k.size(4); got != c.size {
				t.Errorf("size = %d, want %d", got, c.size)
			}
		})
	}
}

func TestUniqueIDRoundTrip(t *testing.T) {
	u := uniqueID{addr: "10.1.2.3:29500"}
	copy(u.token[:], "0123456789abcdef")
	b, err := u.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeID(b[:])
	if err != nil || got != u {
		t.Fatalf("decodeID(encode(%+v)) = %+v, %v", u, got, err)
	}
	if _, err := (uniqueID{addr: strings.Repeat("x", maxAddr+1)}).encode(); err == nil {
		t.Error("an address longer than the id holds was encoded")
	}
	bad := func(f func(b []byte)) []byte {
		c := b
		f(c[:])
		return c[:]
	}
	for _, c := range []struct {
		name string
		id   []byte
		want string
	}{
		{"short", b[:100], "unique id of 100 bytes, want 128"},
		{"foreign", bad(func(b []byte) { b[0] = 'X' }), "was not made by this library's ncclGetUniqueId"},
		{"no address", bad(func(b []byte) { b[24], b[25] = 0, 0 }), "unique id with an address of 0 bytes"},
		{"long address", bad(func(b []byte) { b[24], b[25] = 0, 200 }), "unique id with an address of 200 bytes"},
		{"not host:port", bad(func(b []byte) { b[24], b[25] = 0, 4; copy(b[26:], "abcd") }), `unique id with address "abcd"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeID(c.id)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("decodeID: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestDecide checks the reasons a call gets, against a plan set of one
// 2-rank in-place allgather plan: an out-of-place allgather gets it, to
// run after a copy of the input.
func TestDecide(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "tests", "ports", "single_node", "allgather.plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "allgather.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := planset.ScanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	withPlans := &comm{rank: 1, size: 2, ranksPerNode: 2, plans: planSet{sources: []planset.Source{{Dir: dir, Index: idx}}, dirs: []string{dir}}}
	noPlans := &comm{rank: 0, size: 2, ranksPerNode: 2, plans: planSet{dirs: []string{"/nowhere"}}}
	const base = 0x100000
	// The calls that run an in-place plan after a copy.
	viaCopy := map[string]bool{"out-of-place allgather": true}
	for _, c := range []struct {
		name string
		c    *comm
		k    call
		plan string
		why  string
	}{
		{"in-place allgather fits", withPlans, call{fn: "ncclAllGather", coll: collAllGather, send: base + 4096, recv: base, count: 1024, dtype: 7, op: -1},
			"allgather", "plan allgather fits (allgather for 2 ranks (2 per node), Simple, in-place, message size 8192"},
		{"out-of-place allgather", withPlans, call{fn: "ncclAllGather", coll: collAllGather, send: base + 65536, recv: base, count: 1024, dtype: 7, op: -1},
			"allgather", "no out-of-place plan fits; in-place plan allgather fits (allgather for 2 ranks (2 per node), Simple, in-place, message size 8192"},
		{"out-of-place allreduce", withPlans, call{fn: "ncclAllReduce", coll: collAllReduce, send: base + 65536, recv: base, count: 1024, dtype: 7, op: 0},
			"", "no plan for allreduce of 4096 bytes on 2 ranks (2 per node), out-of-place"},
		{"allreduce", withPlans, call{fn: "ncclAllReduce", coll: collAllReduce, send: base, recv: base, count: 1024, dtype: 7, op: 0},
			"", "no plan for allreduce of 4096 bytes"},
		{"float64", withPlans, call{fn: "ncclAllGather", coll: collAllGather, send: base + 8192, recv: base, count: 1024, dtype: 8, op: -1},
			"", "ncclFloat64: plans compute float16, bfloat16, float32 and int32"},
		{"int8", withPlans, call{fn: "ncclAllReduce", coll: collAllReduce, count: 1, dtype: 0, op: 0}, "", "ncclInt8: plans compute"},
		{"unknown dtype", withPlans, call{fn: "ncclAllReduce", coll: collAllReduce, count: 1, dtype: 42, op: 0}, "", "unknown data type 42"},
		{"avg", withPlans, call{fn: "ncclAllReduce", coll: collAllReduce, count: 1, dtype: 7, op: 4}, "", "no plan for allreduce of 4 bytes on 2 ranks (2 per node), in-place: the plan set has no allreduce plans"},
		{"premulsum", withPlans, call{fn: "ncclReduceScatter", coll: collReduceScatter, count: 1, dtype: 7, op: 5}, "", "user-defined reduction 5: reductions made by ncclRedOpCreatePreMulSum are the fallback NCCL's"},
		{"odd allgather padded", withPlans, call{fn: "ncclAllGather", coll: collAllGather, send: base + 4*121, recv: base, count: 121, dtype: 7, op: -1},
			"allgather", "plan allgather fits (allgather for 2 ranks (2 per node), Simple, in-place, message size 992 in [0, 18446744073709551615], on host memory the cheapest of 1 on the CPU backend (modelled 56 µs; size ranges not applied)) at 124 elements per rank, padded from 121"},
		{"other world size", &comm{rank: 0, size: 3, ranksPerNode: 3, plans: withPlans.plans}, call{fn: "ncclAllGather", coll: collAllGather, send: base, recv: base + 64, count: 4, dtype: 7, op: -1},
			"", "no plan for allgather of 48 bytes on 3 ranks (3 per node), out-of-place: the plan set has allgather plans for 2 ranks (2 per node) only"},
		{"broadcast", withPlans, call{fn: "ncclBroadcast", coll: collBroadcast, count: 1, dtype: 7, op: -1, peer: 0}, "", "mscclgo has no plans for ncclBroadcast"},
		{"recv", withPlans, call{fn: "ncclRecv", coll: collRecv, count: 1, dtype: 7, op: -1, peer: 0}, "", "mscclgo has no plans for ncclRecv"},
		{"no plan set", noPlans, call{fn: "ncclAllReduce", coll: collAllReduce, count: 1024, dtype: 7, op: 0}, "", "no plan set installed (searched [/nowhere]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.c.decide(c.k)
			// Where no plan serves a collective of mscclgo's, the
			// built-in path does (on host memory), but not a
			// reduction of the fallback's.
			if wantGeneric := c.plan == "" && c.k.coll.planName() != "" && elemSize(c.k.dtype) > 0 && c.k.op < numOps; d.generic != wantGeneric {
				t.Errorf("decide = %+v, want generic %v", d, wantGeneric)
			}
			if d.plan != c.plan || !strings.Contains(d.why, c.why) || d.viaCopy != viaCopy[c.name] {
				t.Errorf("decide = %+v, want plan %q (viaCopy %v) and a reason containing %q", d, c.plan, viaCopy[c.name], c.why)
			}
			// The cache answers the same, the second time from its map,
			// with the device path's strings made once.
			for range 2 {
				cd := c.c.decideCached(c.k)
				if cd.plan != d.plan || cd.why != d.why || cd.viaCopy != d.viaCopy || (cd.plan != "") != (cd.devKey != "") {
					t.Errorf("decideCached = %+v, want decide's %+v with a device key where a plan fits", cd, d)
				}
			}
		})
	}
}

// TestDecideHostMemory checks that a call on host memory takes the plan
// the CPU backend runs fastest (planset.HostCostUS), not the one of the
// plans' size ranges, which are a GPU's: between the bundled allreduce
// plans for 2 ranks (LL packets up to 1 MiB, Simple above), LL at 1 KiB,
// Simple at 64 KiB and 1 MiB, inside the packet plan's range; and that
// the Simple plan is instantiated there, below its min_message_size,
// only on host memory.
func TestDecideHostMemory(t *testing.T) {
	dir := bundledPlans(t, map[string]planDef{
		"packet.json": {"allreduce_packet", map[string]string{"world_size": "2"}},
		"rsag.json":   {"allreduce_rsag", map[string]string{"world_size": "2"}},
	})
	idx, err := planset.ScanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &comm{rank: 0, size: 2, ranksPerNode: 2, plans: planSet{sources: []planset.Source{{Dir: dir, Index: idx}}, dirs: []string{dir}}}
	const base = 0x100000
	for _, tc := range []struct {
		count uint64
		plan  string
	}{{256, "allreduce_packet"}, {16 << 10, "allreduce_rsag"}, {256 << 10, "allreduce_rsag"}} {
		d := c.decide(call{fn: "ncclAllReduce", coll: collAllReduce, send: base, recv: base, count: tc.count, dtype: 7, op: 0})
		if !strings.HasPrefix(d.plan, tc.plan) || !strings.Contains(d.why, "on host memory the cheapest of 2 on the CPU backend") {
			t.Errorf("%d floats: decide = %q (%s), want %s, the cheapest on the CPU backend", tc.count, d.plan, d.why, tc.plan)
		}
	}
	rsag := filepath.Join(dir, "rsag.json")
	if _, _, err := c.plansRun.instantiate(rsag, collAllReduce, 2, 64<<10, executor.Float32, true, false); err == nil || !strings.Contains(err.Error(), "below min_message_size") {
		t.Errorf("instantiate on a device at 64 KiB: %v, want the plan's range refused", err)
	}
	if _, _, err := c.plansRun.instantiate(rsag, collAllReduce, 2, 64<<10, executor.Float32, true, true); err != nil {
		t.Errorf("instantiate on host memory at 64 KiB: %v", err)
	}
	// A file of the set that holds another collective's plan, or another
	// rank count's, is a corrupt install, named with the file (issue 44:
	// it was ncclInternalError).
	for _, want := range []struct {
		coll  collective
		ranks int
	}{{collAllGather, 2}, {collAllReduce, 4}} {
		_, _, err := c.plansRun.instantiate(rsag, want.coll, want.ranks, 64<<10, executor.Float32, true, true)
		if err == nil || !strings.Contains(err.Error(), "corrupt plan set: "+rsag+" holds a plan of allreduce on 2 ranks") {
			t.Errorf("instantiate of %s as %s on %d ranks: %v, want a corrupt install named", rsag, want.coll.planName(), want.ranks, err)
		}
	}
}
