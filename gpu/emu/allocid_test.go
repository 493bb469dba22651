//go:build cgo

package emu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/gpu"
)

// TestAllocID: a shareable allocation has one id from any address in it,
// and a new one gets another even where a freed one was, so that a
// communicator of processes registers it anew (devcomm.Comm.slot) instead of
// letting its peers write the freed one's memory. Heap memory, which no
// other process can map, has none.
func TestAllocID(t *testing.T) {
	d, err := OpenIPC()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ider, ok := d.(gpu.AllocIDer)
	if !ok {
		t.Fatalf("the emulated driver (%T) does not name its allocations", d)
	}
	seen := map[uint64]gpu.DevPtr{}
	var prev gpu.DevPtr
	reused := false
	for i := range 8 {
		p, err := d.Alloc(8192)
		if err != nil {
			t.Fatal(err)
		}
		id, err := ider.AllocID(p)
		if err != nil {
			t.Fatalf("AllocID(%#x): %v", uint64(p), err)
		}
		if in, err := ider.AllocID(p + 4100); err != nil || in != id {
			t.Errorf("AllocID inside the allocation at %#x: %d, %v; want %d", uint64(p), in, err, id)
		}
		if at, dup := seen[id]; dup {
			t.Errorf("allocation %d at %#x has the id %d of the freed one at %#x", i, uint64(p), id, uint64(at))
		}
		seen[id] = p
		reused = reused || p == prev
		prev = p
		if err := d.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("an allocation came back at a freed one's address: %v", reused)

	heap, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer heap.Close()
	p, err := heap.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer heap.Free(p)
	if _, err := heap.(gpu.AllocIDer).AllocID(p); err == nil || !strings.Contains(err.Error(), "share with other processes") {
		t.Errorf("AllocID of heap memory: %v, want a refusal", err)
	}
}

// TestSteadyLookupsAllocateNothing: the look-ups a communicator makes for
// each buffer of every steady call (devcomm.Comm.slot: AddressRange, then
// AllocID) allocate nothing. AddressRange once passed a Go pointer to C,
// which put it on the heap at every call.
func TestSteadyLookupsAllocateNothing(t *testing.T) {
	d, err := OpenIPC()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	ider := d.(gpu.AllocIDer)
	io := d.(interface {
		AddressRange(gpu.DevPtr) (gpu.DevPtr, uint64, bool, error)
	})
	var lookupErr error
	allocs := testing.AllocsPerRun(200, func() {
		base, n, ok, err := io.AddressRange(p + 100)
		if err != nil || !ok || base != p || n < 8192 {
			lookupErr = fmt.Errorf("AddressRange(%#x) = %#x, %d, %v, %v; want %#x, >= 8192, true", uint64(p+100), uint64(base), n, ok, err, uint64(p))
		}
		if _, err := ider.AllocID(base); err != nil {
			lookupErr = err
		}
	})
	if lookupErr != nil {
		t.Fatal(lookupErr)
	}
	if allocs != 0 {
		t.Errorf("a steady call's look-ups of a buffer allocate %v objects; want 0", allocs)
	}
}

// TestRetainedFree: an allocation held for a same-process peer
// (gpu.Retainer) stays mapped and writable after its owner's Free, until
// the last Release gives it back (issue 44: a peer's kernel wrote packets
// into an aborted rank's freed scratch, SIGSEGV in packet_op).
func TestRetainedFree(t *testing.T) {
	d, err := OpenIPC()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rt, ok := d.(gpu.Retainer)
	if !ok {
		t.Fatalf("the emulated driver (%T) is not a gpu.Retainer", d)
	}
	ranger := d.(interface {
		AddressRange(gpu.DevPtr) (gpu.DevPtr, uint64, bool, error)
	})
	mapped := func(p gpu.DevPtr) bool {
		_, _, ok, _ := ranger.AddressRange(p)
		return ok
	}
	p, err := d.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	rt.Retain(p)
	rt.Retain(p)
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	if !mapped(p) {
		t.Fatalf("%#x was given back at its owner's Free while held twice", uint64(p))
	}
	if err := d.HtoD(p+4096, []byte{1, 2, 3, 4}); err != nil { // would fault if unmapped
		t.Fatal(err)
	}
	rt.Release(p)
	if !mapped(p) {
		t.Fatalf("%#x was given back while still held once", uint64(p))
	}
	rt.Release(p)
	if mapped(p) {
		t.Errorf("%#x is still mapped after its owner's Free and the last Release", uint64(p))
	}
	// Held and released before the owner frees: the Free gives it back.
	q, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	rt.Retain(q)
	rt.Release(q)
	if !mapped(q) {
		t.Fatalf("%#x was given back by a Release before its owner's Free", uint64(q))
	}
	if err := d.Free(q); err != nil {
		t.Fatal(err)
	}
	if mapped(q) {
		t.Errorf("%#x is still mapped after its Free", uint64(q))
	}
}
