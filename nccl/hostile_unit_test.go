package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/bootstrap"
)

// The Go side of TestHostile's classes, without the C library, so that
// they run under -race:
//
//	go test -race ./nccl -run 'TestHostileGo' -count=1

func TestHostileGoEnvDuration(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration
		err   string
	}{
		{"30s", 30 * time.Second, ""},
		{"2.5", 2500 * time.Millisecond, ""},
		{"1ms", time.Millisecond, ""},
		{"24h", 24 * time.Hour, ""},
		{"86400", 24 * time.Hour, ""},
		{"1e99", 0, `X="1e99": 1e+99 seconds is more than 24h0m0s`},
		{"1e-12", 0, `X="1e-12": 1e-12 seconds is less than 1ms`},
		{"0", 0, `X="0": 0s is outside 1ms to 24h0m0s`},
		{"-1", 0, `X="-1": -1 seconds is less than 1ms`},
		{"999us", 0, `X="999us": 999µs is outside`},
		{"24h0m1s", 0, `X="24h0m1s": 24h0m1s is outside`},
		{"NaN", 0, `X="NaN": not a duration`},
		{"+Inf", 0, `X="+Inf": +Inf seconds is more than`},
		{"soon", 0, `X="soon": not a duration`},
	} {
		got, err := parseEnvDuration("X", c.value)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %v, %v; want %v", c.value, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, %v; want an error with %q", c.value, got, err, c.err)
		}
	}
}

func TestHostileGoCheckCall(t *testing.T) {
	c := &comm{rank: 0, size: 4}
	c.addOp(6, true)
	for _, k := range []struct {
		name string
		call call
		err  string
	}{
		{"sum", call{coll: collAllReduce, count: 16, dtype: 7, op: 0}, ""},
		{"created op", call{coll: collAllReduce, count: 16, dtype: 7, op: 6}, ""},
		{"allgather has no op", call{coll: collAllGather, count: 16, dtype: 7, op: -1}, ""},
		{"zero count", call{coll: collAllReduce, count: 0, dtype: 7, op: 0}, ""},
		{"op -1", call{coll: collAllReduce, count: 16, dtype: 7, op: -1}, "reduction -1 is not an ncclRedOp_t"},
		{"op 7 not created", call{coll: collReduce, count: 16, dtype: 7, op: 7}, "reduction 7 is neither"},
		{"dtype 10", call{coll: collAllGather, count: 16, dtype: 10, op: -1}, "data type 10 is not an ncclDataType_t"},
		{"root 4", call{coll: collBroadcast, count: 16, dtype: 7, op: -1, peer: 4}, "root 4 outside the 4 ranks"},
		{"peer -1", call{coll: collSend, count: 16, dtype: 7, op: -1, peer: -1}, "peer -1 outside the 4 ranks"},
		{"wraps", call{coll: collAllReduce, count: 1<<62 + 256, dtype: 7}, "overflows 64 bits"},
		{"too big", call{coll: collAllReduce, count: 1 << 47, dtype: 7}, "(2^48) one call may name"},
		{"allgather x ranks", call{coll: collAllGather, count: 1 << 46, dtype: 7, op: -1}, "on each of 4 ranks"},
		{"past the address space", call{coll: collAllReduce, count: 16, dtype: 7, send: ^uintptr(0) - 8, recv: 4096}, "the send buffer 0xfffffffffffffff7 of 64 bytes runs past the end"},
	} {
		err := c.checkCall(k.call)
		switch {
		case k.err == "" && err != nil:
			t.Errorf("%s: %v", k.name, err)
		case k.err != "" && (err == nil || !strings.Contains(err.Error(), k.err) || codeOf(err) != resultInvalidArgument):
			t.Errorf("%s: %v; want ncclInvalidArgument with %q", k.name, err, k.err)
		}
	}
}

func TestHostileGoUniqueIDs(t *testing.T) {
	l := &library{roots: map[string]net.Listener{}, hubs: map[string]*hostHub{}, hubRefs: map[string]int{}, ids: map[string]*idUse{}}
	u := uniqueID{token: [16]byte{1, 2, 3, 4}, addr: "127.0.0.1:1"}
	ctx0, err := l.joinID(u, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.joinID(u, 2, 1); err != nil {
		t.Fatal(err)
	}
	// The same id for a communicator of another size: refused, and the
	// ranks waiting on it learn why.
	_, err = l.joinID(u, 4, 2)
	if err == nil || !strings.Contains(err.Error(), "was used for a communicator of 2 ranks in this process, and rank 2 asks for 4") {
		t.Fatalf("another size: %v", err)
	}
	if cause := context.Cause(ctx0); cause == nil || cause.Error() != err.Error() {
		t.Errorf("rank 0's init context: cause %v, want %v", cause, err)
	}
	if _, err := l.joinID(u, 2, 0); err == nil || !strings.Contains(err.Error(), "is spent") {
		t.Errorf("after the refusal: %v", err)
	}
	// A rank that joins twice.
	v := uniqueID{token: [16]byte{5}, addr: "127.0.0.1:1"}
	if _, err := l.joinID(v, 3, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.joinID(v, 3, 1); err == nil || !strings.Contains(err.Error(), "rank 1 of unique id 05000000… (rank 0 at 127.0.0.1:1) joined already") {
		t.Errorf("a rank twice: %v", err)
	}
}

// TestHostileGoMeetStops: a rank whose wait ends while the run is under
// way stops the run and returns only once it has ended.
func TestHostileGoMeetStops(t *testing.T) {
	for _, how := range []string{"timeout", "stop"} {
		t.Run(how, func(t *testing.T) {
			h := newHostHub(2)
			var ended atomic.Bool
			running := make(chan struct{})
			exec := func(ctx context.Context, _ []hostPart) error {
				close(running)
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond) // still touching the buffers a while
				ended.Store(true)
				return context.Cause(ctx)
			}
			stop := make(chan struct{})
			timeout := time.Hour
			if how == "timeout" {
				timeout = 100 * time.Millisecond
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[0] = h.meet(0, "call", hostPart{}, timeout, stop, exec)
				if !ended.Load() {
					t.Errorf("rank 0 returned while the run was still going")
				}
			}()
			time.Sleep(10 * time.Millisecond)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[1] = h.meet(1, "call", hostPart{}, time.Hour, nil, exec)
			}()
			<-running
			if how == "stop" {
				close(stop)
			}
			wg.Wait()
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "and stopped its run") {
					t.Errorf("rank %d: %v, want the stopped run named", r, err)
				}
			}
		})
	}
}

// TestHostileGoEndOnce: of many ends of one communicator at once, one
// wins and the others are refused with ncclInvalidUsage.
func TestHostileGoEndOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := connect(ctx, bootstrap.World{Rank: 0, Size: 1}, nil, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn := "ncclCommDestroy"
			if i%2 == 1 {
				fn = "ncclCommAbort"
			}
			errs[i] = c.end(fn)
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		var ne *ncclError
		switch {
		case err == nil:
			wins++
		case !errors.As(err, &ne) || ne.code != resultInvalidUsage || !strings.Contains(err.Error(), " after ncclComm"):
			t.Errorf("a losing end: %v", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d ends won, want 1", wins)
	}
	if err := c.finalize(); err == nil || codeOf(err) != resultInvalidUsage {
		t.Errorf("finalize after the end: %v", err)
	}
}
