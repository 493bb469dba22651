package cpu

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// deadlockCases are plans that cannot finish, with the exact report.
var deadlockCases = []struct {
	name  string
	build func() *executor.Instance
	want  []executor.BlockedTB
}{
	{
		name: "wait without signal",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(mem, 0, 1)
			b.tb(0, sig(mem, 0)) // one signal for two waits
			b.tb(1, wt(mem, 0), wt(mem, 0))
			return b.inst
		},
		want: []executor.BlockedTB{{Rank: 1, TB: 0, Op: "op 1 wait", Waiting: "memory channel 0 from rank 0 expects signal 2, has 1"}},
	},
	{
		name: "unpaired channel",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(mem, 0, 1)
			c := b.unpaired(mem, 1, 0) // rank 0 declares only one channel to rank 1
			b.tb(0, sig(mem, 0))
			b.tb(1, wt(mem, 0), wt(mem, c))
			return b.inst
		},
		want: []executor.BlockedTB{{Rank: 1, TB: 0, Op: "op 1 wait", Waiting: "unpaired channel: rank 0 declares no channel to rank 1 paired with memory channel 1"}},
	},
	{
		name: "port wait without signal",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(prt, 0, 1)
			b.tb(0, op(plan.OpPut, prt, ch(0), rs(L(in, 0, 16)), rs(R(1, out, 0, 16))))
			b.tb(1, wt(prt, 0))
			return b.inst
		},
		want: []executor.BlockedTB{{Rank: 1, TB: 0, Op: "op 0 wait", Waiting: "port channel 0 from rank 0 expects signal 1, has 0"}},
	},
	{
		name: "circular wait",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(mem, 0, 1)
			b.tb(0, wt(mem, 0), sig(mem, 0))
			b.tb(1, wt(mem, 0), sig(mem, 0))
			return b.inst
		},
		want: []executor.BlockedTB{
			{Rank: 0, TB: 0, Op: "op 0 wait", Waiting: "memory channel 0 from rank 1 expects signal 1, has 0"},
			{Rank: 1, TB: 0, Op: "op 0 wait", Waiting: "memory channel 0 from rank 0 expects signal 1, has 0"},
		},
	},
	{
		name: "barrier with a missing thread block",
		build: func() *executor.Instance {
			b := newBuilder(1, 0)
			b.tb(0, bar(0, 2), bar(0, 2)) // the second generation never completes
			b.tb(0, bar(0, 2))
			return b.inst
		},
		want: []executor.BlockedTB{{Rank: 0, TB: 0, Op: "op 1 barrier", Waiting: "barrier 0: 1 of 2 thread blocks arrived"}},
	},
	{
		name: "semaphore never released",
		build: func() *executor.Instance {
			b := newBuilder(1, 0)
			b.sems(0, 1, 0)
			b.tb(0, sem(plan.OpSemAcquire, 0, 1))
			return b.inst
		},
		want: []executor.BlockedTB{{Rank: 0, TB: 0, Op: "op 0 sem_acquire", Waiting: "semaphore 1 value -1, waits for 0"}},
	},
	{
		name: "packet never written",
		build: func() *executor.Instance {
			b := newBuilder(2, 128)
			b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, 16)), rs(R(1, scr, 0, 16))))
			b.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, 32)), rs(L(out, 0, 32))))
			return b.inst
		},
		want: []executor.BlockedTB{{Rank: 1, TB: 0, Op: "op 0 upkt", Waiting: "packet at scratch[32] has flag 0, want 1",
			Packet: &executor.PacketWait{Buffer: plan.Scratch, Offset: 32, Got: 0, Want: 1}}},
	},
	{
		name: "inside a pipeline",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(mem, 0, 1)
			b.tb(0, pipe(16, 3, sig(mem, 0)))
			b.tb(1, pipe(16, 4, wt(mem, 0)))
			return b.inst
		},
		want: []executor.BlockedTB{{Rank: 1, TB: 0, Op: "op 0.0 wait", Waiting: "memory channel 0 from rank 0 expects signal 4, has 3 (pipeline iteration 3)"}},
	},
}

func TestDeadlock(t *testing.T) {
	t.Parallel()
	for _, c := range deadlockCases {
		for _, race := range []bool{false, true} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				o := opts()
				o.Race = race
				// Detection must not need the watchdog: its report would say
				// "no progress for 1h" where want names each wait.
				o.DeadlockTimeout = time.Hour
				s := openT(t, c.build(), o, schedule{})
				err := s.Launch(context.Background(), bufs(len(s.ranks), 64, 64))
				var de *executor.DeadlockError
				if !errors.As(err, &de) {
					t.Fatalf("got %v, want a DeadlockError", err)
				}
				if diff := cmp.Diff(c.want, de.Blocked); diff != "" {
					t.Errorf("blocked thread blocks (-want +got):\n%s\nerror: %v", diff, err)
				}
				if err := s.Launch(context.Background(), bufs(len(s.ranks), 64, 64)); !errors.Is(err, executor.ErrUnusable) {
					t.Errorf("launch after a deadlock: %v, want ErrUnusable", err)
				}
			})
		}
	}
}

// TestDeadlockAdversarial repeats the deadlocks under the yielding
// scheduler.
func TestDeadlockAdversarial(t *testing.T) {
	t.Parallel()
	for seed := int64(0); seed < 5; seed++ {
		for _, c := range deadlockCases {
			s := openT(t, c.build(), opts(), schedule{yield: true, seed: seed})
			err := s.Launch(context.Background(), bufs(len(s.ranks), 64, 64))
			var de *executor.DeadlockError
			if !errors.As(err, &de) || cmp.Diff(c.want, de.Blocked) != "" {
				t.Errorf("%s, seed %d: %v", c.name, seed, err)
			}
		}
	}
}

// TestWatchdog checks the backstop on a launch whose bookkeeping claims a
// running thread block that never progresses.
func TestWatchdog(t *testing.T) {
	t.Parallel()
	b := newBuilder(1, 0)
	b.tb(0, cp(L(in, 0, 16), L(out, 0, 16)))
	o := opts()
	o.DeadlockTimeout = 20 * time.Millisecond
	s := openT(t, b.inst, o, schedule{})
	l := newLaunch(s, bufs(1, 16, 16), 1)
	l.running = 1
	l.tbs[0].op.Store(&l.tbs[0].tb.Ops[0])
	stop, done := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go l.watchdog(stop, done)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog did not fire")
	}
	close(stop)
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("watchdog fired after %v", d)
	}
	var de *executor.DeadlockError
	if !errors.As(l.err, &de) || len(de.Blocked) != 1 || de.Blocked[0].Waiting != "no progress for 20ms" || de.Blocked[0].Op != "op 0 copy" {
		t.Errorf("got %v", l.err)
	}
}

// longPlan copies 16 bytes ten million times.
func longPlan() *executor.Instance {
	b := newBuilder(2, 0)
	b.tb(0, pipe(16, 10_000_000, cp(L(in, 0, 16), L(out, 0, 16)), nop()))
	b.tb(1, pipe(16, 10_000_000, cp(L(in, 0, 16), L(out, 0, 16)), nop()))
	return b.inst
}

func TestCancel(t *testing.T) {
	t.Parallel()
	s := openT(t, longPlan(), opts(), schedule{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	// A launch that ran to its end would return nil: the deadline error
	// shows it was stopped (how fast is a benchmark's business, not a
	// test's, on a loaded machine).
	err := s.Launch(ctx, bufs(2, 16, 16))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if !strings.Contains(err.Error(), "canceled") {
		t.Errorf("error %q does not say the launch was canceled", err)
	}
}

// TestNoGoroutineLeak runs finished, deadlocked, canceled and racy
// launches and checks that every goroutine exits. It is not parallel:
// parallel tests have not started while it runs.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, c := range deadlockCases {
		for _, race := range []bool{false, true} {
			o := opts()
			o.Race = race
			s, err := New().Open(c.build(), o)
			if err != nil {
				t.Fatal(err)
			}
			s.Launch(context.Background(), bufs(len(c.build().Ranks), 64, 64))
			s.Close()
		}
	}
	s, _ := New().Open(longPlan(), opts())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	s.Launch(ctx, bufs(2, 16, 16))
	cancel()
	s.Close()
	o := opts()
	o.Race = true
	inst, _ := reduceTBG(true)
	s, _ = New().Open(inst, o)
	if err := s.Launch(context.Background(), bufs(2, 64, 64)); err == nil {
		t.Error("racy plan reported no race")
	}
	s.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
