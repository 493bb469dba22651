package cpu_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor/cpu"
)

// openBoards opens the arrival board of n in-process ranks.
func openBoards(t *testing.T, n int) []*cpu.Board {
	t.Helper()
	bs := connectWorld(t, n)
	boards := make([]*cpu.Board, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			boards[r], errs[r] = cpu.OpenBoard(ctx, bs[r], t.TempDir())
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, b := range boards {
			b.Close()
		}
	})
	return boards
}

// TestBoardStates walks one peer's slot through the states rank 0 reads
// for call n: absent, arrived (same call or not, a signature longer than
// the slot shows), one call on, given up, left.
func TestBoardStates(t *testing.T) {
	b := openBoards(t, 2)
	long := strings.Repeat("x", 600)
	type read struct {
		n    uint64
		mine string
		st   cpu.PeerState
		same bool
	}
	for _, tc := range []struct {
		name string
		do   func()
		want []read
	}{
		{"nothing posted", func() {}, []read{{0, "a", cpu.PeerAbsent, false}}},
		{"call 0", func() { b[1].Post(0, []byte("a")) }, []read{{0, "a", cpu.PeerArrived, true}, {0, "b", cpu.PeerArrived, false}, {1, "a", cpu.PeerAbsent, false}}},
		{"call 1, long", func() { b[1].Post(1, []byte(long)) }, []read{{0, "a", cpu.PeerArrived, true}, {1, long, cpu.PeerArrived, true}, {1, long[:599] + "y", cpu.PeerArrived, false}}},
		{"call 2", func() { b[1].Post(2, []byte("c")) }, []read{{0, "a", cpu.PeerMovedOn, false}, {1, long, cpu.PeerArrived, true}, {2, "c", cpu.PeerArrived, true}}},
		{"gave up on 2", func() { b[1].GiveUp(2) }, []read{{2, "c", cpu.PeerMovedOn, false}, {3, "d", cpu.PeerAbsent, false}}},
		{"left", func() { b[1].Leave() }, []read{{3, "d", cpu.PeerLeft, false}, {2, "c", cpu.PeerLeft, false}}},
		{"came to 3, then left", func() { b[1].Post(3, []byte("d")) }, []read{{3, "d", cpu.PeerArrived, true}, {3, "e", cpu.PeerArrived, false}, {4, "e", cpu.PeerLeft, false}}},
	} {
		tc.do()
		for _, w := range tc.want {
			st, _, same, _ := b[0].Peer(1, w.n, []byte(w.mine))
			if st != w.st || same != w.same {
				t.Errorf("%s: Peer(1, %d, %.10q) = %v, %v, want %v, %v", tc.name, w.n, w.mine, st, same, w.st, w.same)
			}
		}
	}
}

// TestBoardWait wakes a waiter that sleeps on the bell with a post from
// another goroutine, and bounds one that nobody wakes.
func TestBoardWait(t *testing.T) {
	b := openBoards(t, 2)
	done := make(chan error, 1)
	go func() {
		done <- b[0].Wait(context.Background(), 20*time.Second, func() bool {
			st, _, _, _ := b[0].Peer(1, 0, []byte("s"))
			return st == cpu.PeerArrived
		})
	}()
	time.Sleep(20 * time.Millisecond) // past the spin: asleep
	b[1].Post(0, []byte("s"))
	if err := <-done; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	err := b[0].Wait(context.Background(), 30*time.Millisecond, func() bool { return false })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a wait nobody ends: %v, want the deadline", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b[0].Wait(ctx, 20*time.Second, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("a wait whose context ended: %v, want its error", err)
	}
}
