//go:build cgo

package emu

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mscclgo/mscclgo/gpu"
)

// TestCommStaging: a communicator's staging buffer is device memory of
// its driver, the same allocation while calls fit in it, a new one of at
// least twice the size when a call needs more (the old one kept, since
// launches enqueued before may still read it), and every one freed at
// Close.
func TestCommStaging(t *testing.T) {
	ss := NewStreams()
	// Every rank checks its buffers once both have closed: a freed
	// buffer's addresses may be the other rank's next allocation.
	var closed sync.WaitGroup
	closed.Add(2)
	errs := withRanksConfig(t, ss, 2, func(cfg *gpu.Config) { cfg.Open = ss.OpenIPC }, func(cr *commRank) error {
		sd := cr.dev.(gpu.StreamDriver)
		done := sync.OnceFunc(closed.Done) // (also on an early return)
		defer done()
		var got []gpu.DevPtr
		for _, step := range []struct {
			n, size uint64
			same    bool // the previous allocation
		}{
			{100, 1 << 16, false},
			{1 << 16, 1 << 16, true},
			{100_000, 1 << 17, false},
			{1 << 17, 1 << 17, true},
			{1 << 20, 1 << 20, false},
		} {
			p, err := cr.comm.Staging(step.n)
			if err != nil {
				return err
			}
			if size := cr.comm.StagingSize(); size != step.size {
				return fmt.Errorf("Staging(%d): %d bytes, want %d", step.n, size, step.size)
			}
			if same := len(got) > 0 && got[len(got)-1] == p; same != step.same {
				return fmt.Errorf("Staging(%d) at %#x after %#x: same allocation %v, want %v", step.n, uint64(p), got, same, step.same)
			}
			// Device memory the communicator's peers can map, the
			// whole requested size writable.
			if base, size, ok, err := sd.AddressRange(p); err != nil || !ok || base != p || size < step.n {
				return fmt.Errorf("Staging(%d) at %#x: allocation %#x, %d bytes, known %v, %v", step.n, uint64(p), uint64(base), size, ok, err)
			}
			want := bytes.Repeat([]byte{byte(cr.rank + 1)}, int(step.n))
			back := make([]byte, step.n)
			if err := sd.HtoD(p, want); err != nil {
				return err
			}
			if err := sd.DtoH(back, p); err != nil {
				return err
			}
			if !bytes.Equal(back, want) {
				return fmt.Errorf("Staging(%d): the bytes written do not read back", step.n)
			}
			if !step.same {
				got = append(got, p)
			}
		}
		err := cr.comm.Close()
		done()
		closed.Wait()
		if err != nil {
			return err
		}
		for _, p := range got {
			if _, _, ok, err := sd.AddressRange(p); err != nil || ok {
				return fmt.Errorf("the staging buffer at %#x is still allocated after Close (%v)", uint64(p), err)
			}
		}
		if _, err := cr.comm.Staging(1); err == nil || !strings.Contains(err.Error(), "closed") {
			return fmt.Errorf("Staging after Close: %v, want the communicator named closed", err)
		}
		return nil
	})
	noErrors(t, errs)
}
