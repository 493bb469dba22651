// Tests of the memory estimate of a run (memory.go) against what the
// buffers and the Checker really allocate.
package harness

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// allocated returns the bytes of the distinct allocations of the buffer
// sets a run uses: a rank's input and output are one allocation when one
// is a slice of the other.
func allocated(l *Layout) uint64 {
	total := uint64(0)
	for range l.Slots() {
		for _, b := range l.Alloc() {
			in, out := round8(uint64(cap(b.Input))), round8(uint64(cap(b.Output)))
			if shares(b.Input, b.Output) {
				total += max(in, out)
			} else {
				total += in + out
			}
		}
	}
	return total
}

// shares reports whether a and b overlap in memory.
func shares(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(cap(b)) && pb < pa+uintptr(cap(a))
}

func TestEstimateMemoryBuffers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		collective string
		nranks     int
		size       uint64
		inPlace    bool
	}{
		{"allreduce", 4, 4096, true},
		{"allreduce", 4, 4096, false},
		{"allgather", 4, 4096, true},
		{"allgather", 4, 4096, false},
		{"reducescatter", 8, 8192, true},
		{"reducescatter", 8, 8192, false},
		{"alltoall", 2, 1024, true},
		{"sendrecv", 4, 1024, true},
		{"test", 2, 1000, true},
	}
	for _, tt := range tests {
		l, err := NewLayout(tt.collective, tt.nranks, tt.size, executor.Float16, tt.inPlace)
		if err != nil {
			t.Fatal(err)
		}
		inst := &executor.Instance{ScratchBytes: 100, Ranks: make([]executor.RankInstance, tt.nranks)}
		m := EstimateMemory(inst, l.BufferLayout, MemoryOptions{})
		type parts struct{ Buffers, Scratch uint64 }
		if d := cmp.Diff(parts{allocated(l), 104 * uint64(tt.nranks)}, parts{m.Buffers, m.Scratch}); d != "" {
			t.Errorf("%s on %d ranks, %d bytes, in place %v (-allocated +estimated):\n%s", tt.collective, tt.nranks, tt.size, tt.inPlace, d)
		}
	}
}

// TestEstimateMemoryTables runs a Checker's fill and checks as mscclgo run
// does and compares its tables with the estimate: never below, at most
// twice (a table rebuilt beside the old one).
func TestEstimateMemoryTables(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		collective string
		nranks     int
		size       uint64
		iters      int
	}{
		{"allreduce", 4, 1 << 20, 3},
		{"allgather", 8, 1 << 20, 100},
		{"reducescatter", 8, 4 << 20, 2},
		{"alltoall", 2, 1 << 20, 2},
		{"sendrecv", 4, 256 << 10, 70},
	} {
		l, err := NewLayout(tt.collective, tt.nranks, tt.size, executor.Float16, true)
		if err != nil {
			t.Fatal(err)
		}
		c := NewChecker()
		bufs := l.Alloc()
		for seq := range tt.iters {
			if err := c.FillInputs(l, bufs, seq); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Check(l, bufs, seq); err != nil {
				t.Fatal(err)
			}
		}
		have := uint64(0)
		for _, g := range c.gens {
			have += uint64(len(g.data))
		}
		for _, s := range c.sums {
			have += uint64(len(s.data))
		}
		est := EstimateMemory(&executor.Instance{Ranks: make([]executor.RankInstance, tt.nranks)}, l.BufferLayout, MemoryOptions{Iters: tt.iters, Tables: true}).Tables
		if est < have || est > 2*have+(1<<20) {
			t.Errorf("%s, %d ranks, %d bytes, %d launches: tables of %d bytes, estimate %d", tt.collective, tt.nranks, tt.size, tt.iters, have, est)
		}
	}
}

func TestEstimateMemoryParts(t *testing.T) {
	t.Parallel()
	p, err := executor.LoadFile(filepath.Join("testdata", "base.json"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Footprint(p, 1<<20, executor.Float16, MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := Footprint(p, 1<<20, executor.Float16, MemoryOptions{Iters: 10, Race: true, Tables: true, DeviceCopies: true})
	if err != nil {
		t.Fatal(err)
	}
	// base: 2 ranks, in-place allreduce of 1 MiB, scratch of 2 chunks of
	// 512 KiB per rank.
	type fixed struct {
		Ranks                     int
		Buffers, Scratch, Device  uint64
		NoTables, NoRace, NoCopie bool
	}
	if d := cmp.Diff(fixed{2, 2 << 20, 2 << 20, 0, true, true, true},
		fixed{plain.Ranks, plain.Buffers, plain.Scratch, plain.Device, plain.Tables == 0, plain.Race == 0, plain.Device == 0}); d != "" {
		t.Errorf("plain estimate (-want +got):\n%s", d)
	}
	if all.Buffers != plain.Buffers || all.Scratch != plain.Scratch || all.Tables == 0 || all.Race == 0 ||
		all.Device != all.Buffers+all.Scratch || all.Total() <= plain.Total() {
		t.Errorf("estimate with every option %+v, without %+v", all, plain)
	}
	if _, err := Footprint(p, 1000, executor.Float16, MemoryOptions{}); err == nil {
		t.Error("Footprint of an invalid size: no error")
	}
}

func TestMemoryUseString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m    MemoryUse
		want string
	}{
		{MemoryUse{Ranks: 8, Buffers: 32 << 30, Tables: 8 << 30, Instance: 40 << 20},
			"8 ranks × 4.0 GiB of buffers + 8.0 GiB of generator and expected-result tables + 40.0 MiB of op tables and runtime"},
		{MemoryUse{Ranks: 1, Buffers: 1 << 30, Scratch: 512 << 20, Race: 3 << 20, Device: 100},
			"1 rank × 1.5 GiB (1.0 GiB of buffers, 512.0 MiB of scratch) + 3.0 MiB of race detector shadow"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// FuzzEstimateMemory checks that the estimate of a run of any plan Load
// accepts, at a size its chunking likely divides, counts at least the
// buffers (package executor's FuzzLoad fuzzes the loading itself).
func FuzzEstimateMemory(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "executor", "testdata", "*.json"))
	files = append(files, filepath.Join("testdata", "base.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint64(1<<20))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint64) {
		p, err := plan.Load(data)
		if err != nil {
			return
		}
		unit := p.BufferAlignment
		for _, g := range p.GPUs {
			for _, c := range []int{g.InputChunks, g.OutputChunks} {
				if c > 0 && unit < 1<<40 {
					unit = lcm(unit, uint64(c)*p.BufferAlignment)
				}
			}
		}
		l, err := executor.PlanLayout(p, unit*(size%8+1), executor.Float16, p.Inplace)
		if err != nil {
			return
		}
		inst, err := executor.Instantiate(p, l.Sizes)
		if err != nil {
			return
		}
		if m := EstimateMemory(inst, l, MemoryOptions{Iters: 3, Race: true, Tables: true}); m.Total() < m.Buffers {
			t.Fatalf("EstimateMemory = %+v: total below the buffers", m)
		}
	})
}
