package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBlockUnits(t *testing.T) {
	for _, tc := range []struct {
		grid, perSM int
		want        int64
	}{
		{grid: 1, perSM: 1, want: ResidencyUnit},
		{grid: 3, perSM: 2, want: 3 * ResidencyUnit / 2},
		{grid: 1, perSM: 3, want: (ResidencyUnit + 2) / 3},
		{grid: 5, perSM: 0, want: 0},
	} {
		if got := BlockUnits(tc.grid, tc.perSM); got != tc.want {
			t.Errorf("BlockUnits(%d, %d) = %d, want %d", tc.grid, tc.perSM, got, tc.want)
		}
	}
}

// TestAdmissionOrder checks first come, first served: a small request
// behind a large waiting one does not overtake it, though it would fit,
// and both start once the holder releases.
func TestAdmissionOrder(t *testing.T) {
	a := NewAdmission("dev", 10)
	ctx := context.Background()
	relA, err := a.Acquire(ctx, BlockUnits(6, 1), "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	rels := make(chan func(), 2)
	go func() {
		rel, err := a.Acquire(ctx, BlockUnits(6, 1), "B", time.Minute)
		if err != nil {
			t.Error(err)
			return
		}
		order <- "B"
		rels <- rel
	}()
	// Let B queue before C asks.
	for deadline := time.Now().Add(5 * time.Second); ; {
		a.mu.Lock()
		n := len(a.queue)
		a.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B did not queue")
		}
		time.Sleep(time.Millisecond)
	}
	go func() {
		rel, err := a.Acquire(ctx, BlockUnits(1, 1), "C", time.Minute)
		if err != nil {
			t.Error(err)
			return
		}
		order <- "C"
		rels <- rel
	}()
	select {
	case who := <-order:
		t.Fatalf("%s started while A held 60%% and B waited first", who)
	case <-time.After(50 * time.Millisecond):
	}
	relA()
	relA() // a second release changes nothing
	// Both fit once A is gone (60% + 10%): both start.
	for range 2 {
		select {
		case <-order:
		case <-time.After(5 * time.Second):
			t.Fatal("B and C did not both start after A released")
		}
	}
	(<-rels)()
	(<-rels)()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used != 0 || len(a.holders) != 0 {
		t.Errorf("after every release: %d units used by %d holders", a.used, len(a.holders))
	}
}

func TestAdmissionRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hold   int64 // units taken by "the other launch" first
		units  int64
		cancel bool
		want   []string
	}{
		{name: "larger than the device", units: BlockUnits(11, 1),
			want: []string{"mine needs 110% of dev's residency, more than the whole device"}},
		{name: "timeout", hold: BlockUnits(8, 1), units: BlockUnits(5, 1),
			want: []string{"mine waited", "room on dev", "needs 50%", "80% is held by other (80%", "nothing was released for"}},
		{name: "canceled", hold: BlockUnits(8, 1), units: BlockUnits(5, 1), cancel: true,
			want: []string{"mine: waiting for room on dev", "context canceled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission("dev", 10)
			if tc.hold > 0 {
				rel, err := a.Acquire(context.Background(), tc.hold, "other", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer rel()
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancel {
				time.AfterFunc(20*time.Millisecond, cancel)
			}
			defer cancel()
			timeout := 50 * time.Millisecond
			if tc.cancel {
				timeout = time.Minute
			}
			rel, err := a.Acquire(ctx, tc.units, "mine", timeout)
			if err == nil {
				rel()
				t.Fatal("Acquire succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.cancel && !errors.Is(err, context.Canceled) {
				t.Errorf("error %v does not wrap context.Canceled", err)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.queue) != 0 {
				t.Errorf("%d waiters left in the queue", len(a.queue))
			}
		})
	}
}
