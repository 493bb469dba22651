//go:build cgo

package emu

import (
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/gpu"
)

// TestStreamWakesOnlyParked: work added while a stream's goroutine runs
// (or spins before parking) sends it no wake, the goroutine wake that
// costs a caller whose process is otherwise idle a futex call and a
// context switch per launch (issue 30); work added once it has parked
// wakes it once, and runs.
func TestStreamWakesOnlyParked(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	st, err := ss.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ss.get(st)
	if err != nil {
		t.Fatal(err)
	}
	busy, started := make(chan struct{}), make(chan struct{})
	if err := ss.Do(st, func() { close(started); <-busy }); err != nil {
		t.Fatal(err)
	}
	<-started
	wakes := func() (uint64, int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.wakes, len(s.wake)
	}
	w0, _ := wakes()
	ran := 0
	for range 5 {
		if err := ss.Do(st, func() { ran++ }); err != nil {
			t.Fatal(err)
		}
	}
	if w, tokens := wakes(); w != w0 || tokens != 0 {
		t.Errorf("work added while the stream ran: %d wakes, %d tokens waiting; want none", w-w0, tokens)
	}
	close(busy)
	if err := ss.Synchronize(st, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ran != 5 {
		t.Fatalf("%d of 5 pieces of work ran", ran)
	}
	// Once parked (after streamSpin without work), one push wakes it.
	deadline := time.Now().Add(time.Minute)
	for {
		s.mu.Lock()
		parked := s.parked
		s.mu.Unlock()
		if parked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream's goroutine has not parked within a minute of running out of work")
		}
		time.Sleep(time.Millisecond)
	}
	w1, _ := wakes()
	if err := ss.Do(st, func() { ran++ }); err != nil {
		t.Fatal(err)
	}
	if err := ss.Synchronize(st, time.Minute); err != nil {
		t.Fatal(err)
	}
	if w, _ := wakes(); w != w1+1 || ran != 6 {
		t.Errorf("work added to a parked stream: %d wakes, %d of 6 ran; want 1 wake and all run", w-w1, ran)
	}
}

// TestFreeWaitsForQueuedWork: memory freed while copies to and from it
// are still queued on a caller's stream (a communicator aborted with
// calls queued frees its staging buffer) stays until the stream has run
// them, as cuMemFree waits for the device's pending work; before, the
// copies wrote to unmapped pages (a SIGSEGV in the stream's goroutine).
// With nothing queued, Free gives the memory back at once.
func TestFreeWaitsForQueuedWork(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	d, err := ss.OpenIPC() // memory files: a freed allocation is unmapped
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sd := d.(*driver)
	st, err := ss.New()
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 16
	src, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	live := func(p gpu.DevPtr) bool {
		_, _, ok, err := sd.AddressRange(p)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	busy, started := make(chan struct{}), make(chan struct{})
	if err := ss.Do(st, func() { close(started); <-busy }); err != nil {
		t.Fatal(err)
	}
	<-started
	for range 4 {
		if err := sd.CopyOnStream(st, dst, src, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Free(dst); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(src); err != nil {
		t.Fatal(err)
	}
	if !live(dst) || !live(src) {
		t.Fatal("freed with copies to and from it still queued")
	}
	close(busy)
	if err := ss.Synchronize(st, time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for live(dst) || live(src) {
		if time.Now().After(deadline) {
			t.Fatal("not given back within a minute of the stream running its queued copies")
		}
		time.Sleep(time.Millisecond)
	}
	idle, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Free(idle); err != nil {
		t.Fatal(err)
	}
	if live(idle) {
		t.Error("freed with nothing queued, and still an allocation")
	}
}
