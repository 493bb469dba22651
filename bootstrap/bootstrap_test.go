// This file tests Connect and the operations of a Bootstrap with ranks
// run as goroutines of the test on 127.0.0.1: set-up (late start, world
// size mismatch, timeouts, garbage), AllGather, Barrier, Send and Recv,
// and oversized frames.

package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// hang bounds every wait of these tests; reaching it means a hang, not
// slowness.
const hang = 60 * time.Second

// testOptions are the options of the test ranks.
func testOptions(log *logSink) Options {
	o := Options{Timeout: 30 * time.Second, CloseTimeout: 5 * time.Second}
	if log != nil {
		o.Logf = log.logf
	}
	return o
}

// logSink collects Options.Logf lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

func (s *logSink) find(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// rdzv returns a fresh rendezvous file path.
func rdzv(t testing.TB) string { return filepath.Join(t.TempDir(), "rank0.addr") }

// world returns rank r's World of a test job meeting through file.
func world(r, n int, file string) World {
	return World{Rank: r, Size: n, RendezvousFile: file, RendezvousHost: "127.0.0.1", Host: "testhost"}
}

// connectAll connects n ranks concurrently; rank r waits delay(r) before
// it starts. It returns the bootstraps and errors by rank.
func connectAll(t testing.TB, n int, opts func(r int) Options, worlds func(r int) World, delay func(r int) time.Duration) ([]*Bootstrap, []error) {
	t.Helper()
	bs := make([]*Bootstrap, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if delay != nil {
				time.Sleep(delay(r))
			}
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			bs[r], errs[r] = Connect(ctx, worlds(r), opts(r))
		}()
	}
	wg.Wait()
	t.Cleanup(func() { closeAll(bs) })
	return bs, errs
}

// startWorld connects n ranks and fails the test on any error.
func startWorld(t testing.TB, n int, opts Options) []*Bootstrap {
	t.Helper()
	file := rdzv(t)
	bs, errs := connectAll(t, n, func(int) Options { return opts }, func(r int) World { return world(r, n, file) }, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return bs
}

// closeAll closes the bootstraps concurrently.
func closeAll(bs []*Bootstrap) {
	var wg sync.WaitGroup
	for _, b := range bs {
		if b != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.Close()
			}()
		}
	}
	wg.Wait()
}

// onAll runs f on every rank concurrently and returns the errors by rank.
func onAll(bs []*Bootstrap, f func(ctx context.Context, b *Bootstrap) error) []error {
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for r, b := range bs {
		if b == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			errs[r] = f(ctx, b)
		}()
	}
	wg.Wait()
	return errs
}

func TestAllGatherBarrier(t *testing.T) {
	const n = 4
	bs := startWorld(t, n, testOptions(nil))
	for r, b := range bs {
		if b.Rank() != r || b.Size() != n {
			t.Fatalf("rank %d: Rank() %d, Size() %d", r, b.Rank(), b.Size())
		}
		if diff := cmp.Diff([]Host{{Name: "testhost", Ranks: []int{0, 1, 2, 3}}}, b.Hosts()); diff != "" {
			t.Errorf("rank %d: Hosts (-want +got):\n%s", r, diff)
		}
		if len(b.Peers()) != n || b.Peers()[r].Host != "testhost" {
			t.Errorf("rank %d: Peers %+v", r, b.Peers())
		}
	}
	blob := func(round, r int) []byte {
		if round == 1 {
			return nil // empty contributions
		}
		return bytes.Repeat([]byte{byte(r + 1)}, (r+1)*(round+1)*1000)
	}
	for round := range 4 {
		errs := onAll(bs, func(ctx context.Context, b *Bootstrap) error {
			got, err := b.AllGather(ctx, blob(round, b.Rank()))
			if err != nil {
				return err
			}
			for r := range n {
				if !bytes.Equal(got[r], blob(round, r)) || got[r] == nil {
					return fmt.Errorf("round %d: part %d has %d bytes, want %d", round, r, len(got[r]), len(blob(round, r)))
				}
			}
			return b.Barrier(ctx)
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
}

func TestSingleRank(t *testing.T) {
	b, err := Connect(context.Background(), World{Rank: 0, Size: 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := b.AllGather(ctx, []byte("x"))
	if err != nil || len(got) != 1 || string(got[0]) != "x" {
		t.Errorf("AllGather: %q, %v", got, err)
	}
	if err := b.Barrier(ctx); err != nil {
		t.Error(err)
	}
	if err := b.Send(ctx, 0, 1, []byte("self")); err != nil {
		t.Error(err)
	}
	if m, err := b.Recv(ctx, 0, 1); err != nil || string(m) != "self" {
		t.Errorf("Recv: %q, %v", m, err)
	}
	b.Close()
	if err := b.Barrier(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Barrier after Close: %v, want ErrClosed", err)
	}
	if _, ok := <-b.Lost(); ok {
		t.Error("Lost() not closed by Close")
	}
}

func TestSendRecvTags(t *testing.T) {
	const n, msgs = 3, 20
	bs := startWorld(t, n, testOptions(nil))
	payload := func(from, to int, tag uint32, i int) []byte {
		return []byte(fmt.Sprintf("%d->%d tag %d #%d", from, to, tag, i))
	}
	errs := onAll(bs, func(ctx context.Context, b *Bootstrap) error {
		me := b.Rank()
		// Two goroutines send to every rank (this one included), one tag
		// each, concurrently.
		var wg sync.WaitGroup
		sendErrs := make(chan error, 2)
		for _, tag := range []uint32{1, 2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range msgs {
					for to := range n {
						if err := b.Send(ctx, to, tag, payload(me, to, tag, i)); err != nil {
							sendErrs <- err
							return
						}
					}
				}
			}()
		}
		// Receive tag 2 before tag 1: tags are independent queues, and
		// each is in order.
		for from := range n {
			for _, tag := range []uint32{2, 1} {
				for i := range msgs {
					m, err := b.Recv(ctx, from, tag)
					if err != nil {
						return err
					}
					if want := payload(from, me, tag, i); !bytes.Equal(m, want) {
						return fmt.Errorf("got %q, want %q", m, want)
					}
				}
			}
		}
		wg.Wait()
		close(sendErrs)
		return <-sendErrs
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// Bad peers are refused, naming the rank and the step.
	err := bs[0].Send(context.Background(), 7, 0, nil)
	if err == nil || err.Error() != "bootstrap: rank 0: send to rank 7 (tag 0): no rank 7 in a world of 3 ranks" {
		t.Errorf("Send to rank 7: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := bs[1].Recv(ctx, 2, 99); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rank 1: recv from rank 2 (tag 99)") {
		t.Errorf("Recv with nothing sent: %v", err)
	}
}

func TestLateStart(t *testing.T) {
	const n = 4
	file := rdzv(t)
	// Rank 0 comes last but one, rank 3 last: the others retry until
	// they can join.
	delay := func(r int) time.Duration {
		return map[int]time.Duration{0: 300 * time.Millisecond, 3: 600 * time.Millisecond}[r]
	}
	bs, errs := connectAll(t, n, func(int) Options { return testOptions(nil) }, func(r int) World { return world(r, n, file) }, delay)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, err := range onAll(bs, func(ctx context.Context, b *Bootstrap) error { return b.Barrier(ctx) }) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestWorldSizeMismatch(t *testing.T) {
	file := rdzv(t)
	opts := func(int) Options { o := testOptions(nil); o.Timeout = 5 * time.Second; return o }
	worlds := func(r int) World {
		w := world(r, 3, file)
		if r == 2 {
			w.Size = 4
		}
		return w
	}
	_, errs := connectAll(t, 3, opts, worlds, nil)
	want := map[int]string{
		0: "bootstrap: rank 0: handshake: rank 2 reported world size 4, this rank has 3",
		2: "bootstrap: rank 2: handshake: rank 0 refused this rank: rank 2 reported world size 4, rank 0 has 3",
	}
	for r, w := range want {
		if errs[r] == nil || errs[r].Error() != w {
			t.Errorf("rank %d: %v\nwant %s", r, errs[r], w)
		}
	}
	// Rank 1 was either refused (if it had joined) or gave up waiting.
	if errs[1] == nil || !strings.HasPrefix(errs[1].Error(), "bootstrap: rank 1: ") {
		t.Errorf("rank 1: %v", errs[1])
	}
}

func TestSetupTimeouts(t *testing.T) {
	opts := testOptions(nil)
	opts.Timeout = 500 * time.Millisecond

	// Rank 2 never comes.
	file := rdzv(t)
	_, errs := connectAll(t, 2, func(int) Options { return opts }, func(r int) World { return world(r, 3, file) }, nil)
	if err := errs[0]; !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "bootstrap: rank 0: waiting for rank 2 to join at 127.0.0.1:") {
		t.Errorf("rank 0: %v", err)
	}
	// Rank 1 times out too, or hears first that rank 0 did.
	if err := errs[1]; err == nil || !(errors.Is(err, context.DeadlineExceeded) && strings.HasPrefix(err.Error(), "bootstrap: rank 1: waiting for the rank table from rank 0 at 127.0.0.1:") ||
		strings.HasPrefix(err.Error(), "bootstrap: rank 1: handshake: rank 0 refused this rank: rank 0 failed the set-up: waiting for rank 2 to join at 127.0.0.1:")) {
		t.Errorf("rank 1: %v", err)
	}

	// Rank 0 never comes: a master address nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Connect(context.Background(), World{Rank: 3, Size: 4, Master: addr, Token: testToken}, opts)
	if want := "bootstrap: rank 3: waiting for rank 0 at " + addr + ": connect: connection refused after "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no rank 0: %v\nwant %s...", err, want)
	}
	// Nor its rendezvous file.
	file = rdzv(t)
	_, err = Connect(context.Background(), world(1, 2, file), opts)
	if want := "bootstrap: rank 1: waiting for rank 0's address in " + file + ": " + file + ": no such file or directory after "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no rendezvous file: %v\nwant %s...", err, want)
	}
}

// TestGarbageHandshake sends garbage to rank 0 during the set-up and to
// another rank's peer port afterwards: both are refused and logged, and
// the job is not disturbed. A rank whose "rank 0" speaks garbage fails.
func TestGarbageHandshake(t *testing.T) {
	const n = 3
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	master := ln.Addr().String()
	logs := &logSink{}
	// Garbage reaches rank 0 before any rank: an HTTP request, and a
	// frame header announcing a 1 TiB hello.
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), header{kind: kindHello, n: 1 << 40}.encode()} {
		c, err := net.Dial("tcp", master)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(junk); err != nil {
			t.Fatal(err)
		}
	}
	opts := func(r int) Options {
		o := testOptions(logs)
		if r == 0 {
			o.Listener = ln
		}
		return o
	}
	worlds := func(r int) World { return World{Rank: r, Size: n, Master: master, Token: testToken} }
	bs, errs := connectAll(t, n, opts, worlds, func(r int) time.Duration { return time.Duration(r) * 100 * time.Millisecond })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for _, want := range []string{`bad frame: magic "GET ", want "MSGO"`, "frame too large: hello frame of 1099511627776 bytes, limit 65536"} {
		if !logs.find(want) {
			t.Errorf("no log line with %q in %q", want, logs.lines)
		}
	}

	// Garbage to rank 1's peer port, after the set-up.
	c, err := net.Dial("tcp", bs[1].Peers()[1].Addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("\x00\x01\x02\x03garbage garbage garbage"))
	h, p, err := readFrame(c, 1<<16)
	if err != nil || h.kind != kindFail || !strings.Contains(string(p), "bad frame: magic") {
		t.Errorf("garbage to a peer port: answered %v %q %v, want a fail frame", h.kind, p, err)
	}
	c.Close()
	// A peer hello of another job.
	c, err = net.Dial("tcp", bs[1].Peers()[1].Addr)
	if err != nil {
		t.Fatal(err)
	}
	writeFrame(c, header{kind: kindPeerHello}, peerHello{rank: 2, size: n, session: 12345}.encode(), 0)
	h, p, err = readFrame(c, 1<<16)
	if err != nil || h.kind != kindFail || !strings.Contains(string(p), "belongs to another job") {
		t.Errorf("peer hello of another job: answered %v %q %v, want a fail frame", h.kind, p, err)
	}
	c.Close()
	for r, err := range onAll(bs, func(ctx context.Context, b *Bootstrap) error {
		if err := b.Send(ctx, (b.Rank()+1)%n, 0, []byte("ok")); err != nil {
			return err
		}
		if _, err := b.Recv(ctx, (b.Rank()+n-1)%n, 0); err != nil {
			return err
		}
		return b.Barrier(ctx)
	}) {
		if err != nil {
			t.Errorf("rank %d after garbage: %v", r, err)
		}
	}

	// A "rank 0" that answers a hello with garbage.
	fake, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	go func() {
		c, err := fake.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		readFrame(c, 1<<16)
		c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n" + strings.Repeat(" ", 30)))
	}()
	_, err = Connect(context.Background(), World{Rank: 1, Size: 2, Master: fake.Addr().String(), Token: testToken}, Options{Timeout: 10 * time.Second})
	if want := `bootstrap: rank 1: handshake with rank 0 at ` + fake.Addr().String() + `: bad frame: magic "SSH-", want "MSGO"`; err == nil || err.Error() != want {
		t.Errorf("garbage rank 0: %v\nwant %s", err, want)
	}
}

func TestOversizedFrame(t *testing.T) {
	const n = 2
	file := rdzv(t)
	logs := &logSink{}
	opts := func(r int) Options {
		o := testOptions(logs)
		if r == 1 {
			o.MaxMessage = 1 << 10 // rank 1 reads at most 1 KiB
		}
		return o
	}
	bs, errs := connectAll(t, n, opts, func(r int) World { return world(r, n, file) }, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()

	// The sender's own limit is checked before anything is sent.
	err := bs[1].Send(ctx, 0, 0, make([]byte, 2<<10))
	if want := "bootstrap: rank 1: send to rank 0 (tag 0): frame too large: 2048 bytes, limit 1024 (Options.MaxMessage)"; !errors.Is(err, ErrFrameTooLarge) || err.Error() != want {
		t.Errorf("Send over the sender's limit: %v\nwant %s", err, want)
	}
	if _, err := bs[1].AllGather(ctx, make([]byte, 2<<10)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("AllGather over the limit: %v", err)
	}

	// Rank 0 may send 4 KiB, rank 1 refuses to read it.
	if err := bs[0].Send(ctx, 1, 5, []byte("small")); err != nil {
		t.Fatal(err)
	}
	if err := bs[0].Send(ctx, 1, 5, make([]byte, 4<<10)); err != nil && !strings.Contains(err.Error(), "refused") {
		t.Errorf("Send over the receiver's limit: %v", err)
	}
	if m, err := bs[1].Recv(ctx, 0, 5); err != nil || string(m) != "small" {
		t.Errorf("message before the oversized one: %q, %v", m, err)
	}
	_, err = bs[1].Recv(ctx, 0, 5)
	if want := "bootstrap: rank 1: recv from rank 0 (tag 5): rank 0 sent a frame this rank refused: frame too large: data frame of 4096 bytes, limit 1024"; !errors.Is(err, ErrFrameTooLarge) || err.Error() != want {
		t.Errorf("Recv of the oversized frame: %v\nwant %s", err, want)
	}
	// The refusal reaches the sender: its next sends fail, naming it.
	var sendErr error
	for deadline := time.Now().Add(hang); time.Now().Before(deadline) && sendErr == nil; time.Sleep(10 * time.Millisecond) {
		sendErr = bs[0].Send(ctx, 1, 5, []byte("more"))
	}
	if want := "bootstrap: rank 0: send to rank 1 (tag 5): rank 1 refused this rank's messages: frame too large: data frame of 4096 bytes, limit 1024"; sendErr == nil || sendErr.Error() != want {
		t.Errorf("Send after the refusal: %v\nwant %s", sendErr, want)
	}
	// Neither rank is lost: the collectives still work.
	for r, err := range onAll(bs, func(ctx context.Context, b *Bootstrap) error { return b.Barrier(ctx) }) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestCollectiveMismatch(t *testing.T) {
	const n = 3
	bs := startWorld(t, n, testOptions(nil))
	errs := onAll(bs, func(ctx context.Context, b *Bootstrap) error {
		if b.Rank() == 1 {
			return b.Barrier(ctx)
		}
		_, err := b.AllGather(ctx, []byte("x"))
		return err
	})
	for r, err := range errs {
		if !errors.Is(err, ErrCollective) || !strings.Contains(err.Error(), "rank 1 called barrier #1, rank 0 called allgather #1") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// Every later collective fails too.
	for r, err := range onAll(bs, func(ctx context.Context, b *Bootstrap) error { return b.Barrier(ctx) }) {
		if !errors.Is(err, ErrCollective) {
			t.Errorf("rank %d, later barrier: %v", r, err)
		}
	}
}

func TestAbandonedCollective(t *testing.T) {
	const n = 3
	bs := startWorld(t, n, testOptions(nil))
	// Rank 2 gives up on barrier #1 before the others arrive.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := bs[2].Barrier(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "bootstrap: rank 2: barrier #1: ") {
		t.Errorf("rank 2: %v", err)
	}
	for r, err := range onAll(bs[:2], func(ctx context.Context, b *Bootstrap) error { return b.Barrier(ctx) }) {
		if !errors.Is(err, ErrCollective) || !strings.Contains(err.Error(), "rank 2 abandoned barrier #1: context deadline exceeded") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestCloseWithSilentConnection: a connection that never sends its first
// frame does not hold Close up (it would until Options.Timeout).
func TestCloseWithSilentConnection(t *testing.T) {
	opts := testOptions(nil)
	opts.Timeout = hang
	bs := startWorld(t, 2, opts)
	for _, b := range bs {
		c, err := net.Dial("tcp", b.Peers()[b.Rank()].Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	done := make(chan struct{})
	go func() {
		closeAll(bs)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(hang / 2):
		t.Fatal("Close waits for a silent connection")
	}
}

// TestWorldSizeBound: a world size beyond MaxWorldSize is refused before
// anything is allocated for it, from the environment and by Connect.
func TestWorldSizeBound(t *testing.T) {
	env := map[string]string{EnvRank: "0", EnvWorldSize: "100000000"}
	_, _, err := FromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "a job has at most 65536 ranks") {
		t.Errorf("FromEnv: %v, want the bound named", err)
	}
	_, err = Connect(context.Background(), World{Rank: 0, Size: 100_000_000, Master: "127.0.0.1:1"}, testOptions(nil))
	if err == nil || !strings.Contains(err.Error(), "world size 100000000: a job has at most 65536 ranks") {
		t.Errorf("Connect: %v, want the bound named", err)
	}
}

// TestRankListClipped: an error naming many ranks names the first few
// and counts the rest.
func TestRankListClipped(t *testing.T) {
	ranks := make([]int, 60000)
	for i := range ranks {
		ranks[i] = i + 1
	}
	got := rankList(ranks)
	want := "ranks 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 and 59984 more"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := rankList([]int{4}); got != "rank 4" {
		t.Errorf("one rank: %q", got)
	}
}
