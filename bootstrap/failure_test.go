// This file tests the liveness service with goroutine ranks: a rank whose
// connections close abruptly mid-operation (rank 0 or another), a rank
// that goes silent, and a clean shutdown, which must not be a loss.

package bootstrap

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// wantLost checks that err is a loss of rank k.
func wantLost(t *testing.T, who string, err error, k int) {
	t.Helper()
	var pl *PeerLostError
	if !errors.Is(err, ErrPeerLost) || !errors.As(err, &pl) || pl.Rank != k {
		t.Errorf("%s: %v, want rank %d lost", who, err, k)
	}
}

// nextLost reads one loss from b.Lost(), or fails the test after hang.
func nextLost(t *testing.T, b *Bootstrap) LostRank {
	t.Helper()
	select {
	case l := <-b.Lost():
		return l
	case <-time.After(hang):
		t.Fatalf("rank %d: no loss reported", b.Rank())
		return LostRank{}
	}
}

func TestAbruptLoss(t *testing.T) {
	const n, victim = 4, 2
	bs := startWorld(t, n, testOptions(nil))
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	// Everyone has talked to the victim, so data links exist both ways.
	for r, err := range onAll(bs, func(ctx context.Context, b *Bootstrap) error {
		for p := range n {
			if err := b.Send(ctx, p, 1, []byte("hi")); err != nil {
				return err
			}
		}
		for p := range n {
			if _, err := b.Recv(ctx, p, 1); err != nil {
				return err
			}
		}
		return b.Barrier(ctx)
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}

	// The survivors block in a barrier, rank 1 also in a Recv from the
	// victim; then the victim's connections close at once, as if its
	// process were killed.
	survivors := []*Bootstrap{bs[0], bs[1], bs[3]}
	var wg sync.WaitGroup
	var recvErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, recvErr = bs[1].Recv(ctx, victim, 9)
	}()
	barrierErrs := make(chan []error, 1)
	go func() {
		barrierErrs <- onAll(survivors, func(ctx context.Context, b *Bootstrap) error { return b.Barrier(ctx) })
	}()
	time.Sleep(50 * time.Millisecond) // let them block (the test holds either way)
	bs[victim].abort()

	for i, err := range <-barrierErrs {
		wantLost(t, "barrier", err, victim)
		if !strings.HasPrefix(err.Error(), "bootstrap: rank ") || !strings.Contains(err.Error(), ": barrier #2: rank 2 lost: ") {
			t.Errorf("survivor %d: %v", i, err)
		}
	}
	wg.Wait()
	wantLost(t, "rank 1 recv", recvErr, victim)
	for _, b := range survivors {
		l := nextLost(t, b)
		if l.Rank != victim || l.Reason == "" {
			t.Errorf("rank %d: Lost() gave %+v", b.Rank(), l)
		}
		<-b.Context().Done()
		wantLost(t, "Context cause", context.Cause(b.Context()), victim)
		wantLost(t, "send after the loss", b.Send(ctx, victim, 1, []byte("x")), victim)
		if err := b.Barrier(ctx); err == nil {
			t.Errorf("rank %d: barrier after the loss succeeded", b.Rank())
		}
	}
	// Rank 0 saw it first-hand, the others from rank 0.
	bs[0].mu.Lock()
	l0 := bs[0].lost[victim].Reason
	bs[0].mu.Unlock()
	if l0 != "connection closed without a goodbye" && l0 != "connection reset" {
		t.Errorf("rank 0's reason: %q", l0)
	}
	// Messages between survivors still flow.
	if err := bs[1].Send(ctx, 3, 4, []byte("still here")); err != nil {
		t.Error(err)
	}
	if m, err := bs[3].Recv(ctx, 1, 4); err != nil || string(m) != "still here" {
		t.Errorf("survivors: %q, %v", m, err)
	}
}

func TestRankZeroLost(t *testing.T) {
	const n = 3
	bs := startWorld(t, n, testOptions(nil))
	errs := make(chan []error, 1)
	go func() {
		errs <- onAll(bs[1:], func(ctx context.Context, b *Bootstrap) error {
			_, err := b.AllGather(ctx, []byte("x"))
			return err
		})
	}()
	time.Sleep(50 * time.Millisecond)
	bs[0].abort()
	for i, err := range <-errs {
		wantLost(t, "allgather", err, 0)
		if i == 0 && !strings.HasPrefix(err.Error(), "bootstrap: rank 1: allgather #1: rank 0 lost: ") {
			t.Errorf("rank 1: %v", err)
		}
	}
	for _, b := range bs[1:] {
		if l := nextLost(t, b); l.Rank != 0 {
			t.Errorf("rank %d: Lost() gave %+v", b.Rank(), l)
		}
	}
}

// TestSilentRank joins a fake rank that completes the handshake and then
// never writes again: rank 0 declares it lost after HeartbeatTimeout and
// tells the real ranks.
func TestSilentRank(t *testing.T) {
	const n = 3
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	master := ln.Addr().String()
	opts := func(r int) Options {
		o := testOptions(nil)
		o.HeartbeatInterval = 50 * time.Millisecond
		o.HeartbeatTimeout = 300 * time.Millisecond
		if r == 0 {
			o.Listener = ln
		}
		return o
	}
	// The fake rank 2: hello, table, then silence (it keeps reading, so
	// rank 0's writes succeed).
	fakeDone := make(chan struct{})
	defer func() { <-fakeDone }()
	go func() {
		defer close(fakeDone)
		c, err := net.Dial("tcp", master)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if err := joinAs(c, []byte(testToken), hello{rank: 2, size: n, host: "fake", addr: "127.0.0.1:1"}); err != nil {
			t.Error(err)
			return
		}
		for {
			if _, _, err := readFrame(c, 1<<20); err != nil {
				return
			}
		}
	}()
	bs, errs := connectAll(t, 2, opts, func(r int) World { return World{Rank: r, Size: n, Master: master, Token: testToken} }, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for _, b := range bs {
		l := nextLost(t, b)
		if l.Rank != 2 || !strings.Contains(l.Reason, "heartbeat timeout") {
			t.Errorf("rank %d: Lost() gave %+v", b.Rank(), l)
		}
	}
	closeAll(bs) // ends the fake rank's connection
}

func TestCleanShutdownIsNotLoss(t *testing.T) {
	const n = 4
	opts := testOptions(nil)
	opts.HeartbeatInterval = 20 * time.Millisecond
	bs := startWorld(t, n, opts)
	// Watch every Lost() channel until it closes.
	var mu sync.Mutex
	var losses []LostRank
	var watchers sync.WaitGroup
	for _, b := range bs {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			for l := range b.Lost() {
				mu.Lock()
				losses = append(losses, l)
				mu.Unlock()
			}
		}()
	}
	// Traffic in every direction, then a final barrier, then Close at
	// different times (rank 0 first, so the others outlive it).
	for r, err := range onAll(bs, func(ctx context.Context, b *Bootstrap) error {
		for p := range n {
			if err := b.Send(ctx, p, 3, []byte("bye soon")); err != nil {
				return err
			}
		}
		for p := range n {
			if _, err := b.Recv(ctx, p, 3); err != nil {
				return err
			}
		}
		return b.Barrier(ctx)
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	var wg sync.WaitGroup
	for r, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(r) * 60 * time.Millisecond)
			b.Close()
		}()
	}
	wg.Wait()
	watchers.Wait()
	if len(losses) > 0 {
		t.Errorf("clean shutdown reported losses: %+v", losses)
	}
	for _, b := range bs {
		if c := context.Cause(b.Context()); !errors.Is(c, ErrClosed) {
			t.Errorf("rank %d: context cause %v, want ErrClosed", b.Rank(), c)
		}
	}
}

// TestPeerClosed: operations that need a rank that closed fail naming it,
// and are not losses; messages it sent before closing are still
// delivered.
func TestPeerClosed(t *testing.T) {
	const n = 3
	bs := startWorld(t, n, testOptions(nil))
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := bs[2].Send(ctx, 1, 0, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	bs[2].Close()
	if m, err := bs[1].Recv(ctx, 2, 0); err != nil || string(m) != "last words" {
		t.Errorf("message sent before Close: %q, %v", m, err)
	}
	_, err := bs[1].Recv(ctx, 2, 0)
	var pc *PeerClosedError
	if !errors.Is(err, ErrPeerClosed) || !errors.As(err, &pc) || pc.Rank != 2 {
		t.Errorf("Recv from a closed rank: %v", err)
	}
	for r, err := range onAll(bs[:2], func(ctx context.Context, b *Bootstrap) error { return b.Barrier(ctx) }) {
		if err == nil || errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "rank 2 closed its bootstrap") {
			t.Errorf("rank %d: barrier without rank 2: %v", r, err)
		}
	}
	for _, b := range bs[:2] {
		select {
		case l := <-b.Lost():
			t.Errorf("rank %d: Lost() gave %+v for a clean close", b.Rank(), l)
		default:
		}
	}
}

// TestCloseWakesOperations: operations blocked on a rank fail with
// ErrClosed when that rank closes, and its peers see a close, not a loss.
func TestCloseWakesOperations(t *testing.T) {
	const n = 2
	bs := startWorld(t, n, testOptions(nil))
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	errs := make(chan error, 2)
	go func() {
		_, err := bs[1].Recv(ctx, 0, 1)
		errs <- err
	}()
	go func() { errs <- bs[1].Barrier(ctx) }()
	time.Sleep(50 * time.Millisecond) // let them block (the test holds either way)
	bs[1].Close()
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) || !strings.HasPrefix(err.Error(), "bootstrap: rank 1: ") {
			t.Errorf("blocked operation: %v, want ErrClosed", err)
		}
	}
	if err := bs[1].Send(ctx, 0, 1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	err := bs[0].Barrier(ctx)
	var pc *PeerClosedError
	if !errors.As(err, &pc) || pc.Rank != 1 || errors.Is(err, ErrPeerLost) {
		t.Errorf("rank 0's barrier: %v, want rank 1 closed", err)
	}
}
