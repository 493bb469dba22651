//go:build cgo

package fabric

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// hub is an in-process bootstrap for n ranks: only the all-gather and
// the job's context are used by a Wire's set-up.
type hub struct {
	n     int
	mu    sync.Mutex
	cond  *sync.Cond
	round int
	parts [][]byte
	got   int
	out   [][]byte
	ctx   context.Context
}

func newHub(n int) *hub {
	h := &hub{n: n, parts: make([][]byte, n), ctx: context.Background()}
	h.cond = sync.NewCond(&h.mu)
	return h
}

type hubNet struct {
	h    *hub
	rank int
}

func (n hubNet) Rank() int { return n.rank }
func (n hubNet) Size() int { return n.h.n }
func (n hubNet) Send(context.Context, int, uint32, []byte) error {
	return fmt.Errorf("hub: no point-to-point messages")
}
func (n hubNet) Recv(context.Context, int, uint32) ([]byte, error) {
	return nil, fmt.Errorf("hub: no point-to-point messages")
}
func (n hubNet) Context() context.Context { return n.h.ctx }
func (n hubNet) AllGather(_ context.Context, data []byte) ([][]byte, error) {
	h := n.h
	h.mu.Lock()
	defer h.mu.Unlock()
	round := h.round
	h.parts[n.rank] = data
	h.got++
	if h.got == h.n {
		h.out, h.parts, h.got = h.parts, make([][]byte, h.n), 0
		h.round++
		h.cond.Broadcast()
	}
	for h.round == round {
		h.cond.Wait()
	}
	return h.out, nil
}

// openAll opens n wires of provider in this process, or skips.
func openAll(t *testing.T, n int, provider string, ring uint64) []*Wire {
	t.Helper()
	if _, err := Available(provider); err != nil {
		t.Skipf("libfabric provider %q not available here (install libfabric1): %v", provider, err)
	}
	h := newHub(n)
	ws := make([]*Wire, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			ws[r], errs[r] = Open(context.Background(), hubNet{h, r}, Options{Provider: provider, RingBytes: ring, Timeout: 20 * time.Second})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, w := range ws {
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return ws
}

func pattern(from, to, i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(from*31 + to*7 + i*13 + j)
	}
	return b
}

// TestMessages sends messages of many sizes (empty, fragmented, more
// than a ring, every other one as a pair with a header-only second
// message) between every pair of ranks on two tags at once, and checks
// that each arrives whole and in order.
func TestMessages(t *testing.T) {
	for _, c := range []struct {
		prov  string
		ring  uint64
		sizes []int
	}{
		{"tcp;ofi_rxm", 64 << 10, []int{0, 1, 63, 64, 1000, 16 << 10, 100 << 10, 300 << 10}},
		{"shm", 64 << 10, []int{0, 1, 63, 64, 1000, 16 << 10, 100 << 10, 300 << 10}},
		// Payloads from the caller's memory and read in the ring (64
		// KiB and more, one record), and of several records.
		{"tcp;ofi_rxm", 0, []int{64 << 10, 2 << 20, 1, 1 << 20, 5 << 20}},
		// Held payloads that fill a small ring: the sender waits for
		// their release.
		{"tcp;ofi_rxm", 256 << 10, []int{100 << 10, 100 << 10, 100 << 10, 100 << 10, 100 << 10, 1}},
	} {
		prov := c.prov
		t.Run(fmt.Sprintf("%s/ring=%d", prov, c.ring), func(t *testing.T) {
			const n = 3
			ws := openAll(t, n, prov, c.ring)
			sizes := c.sizes
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			for from := range n {
				for to := range n {
					if from == to {
						continue
					}
					for _, tag := range []uint32{10, 11} {
						wg.Go(func() {
							for i, sz := range sizes {
								head := []byte{byte(i), byte(tag)}
								send := ws[from].SendPort
								if i%2 == 1 {
									// A pair: the message and a header-only second one.
									send = func(ctx context.Context, to int, tag uint32, head, payload []byte) error {
										return ws[from].SendPort2(ctx, to, tag, head, payload, []byte{0xEE, byte(i)})
									}
								}
								if err := send(ctx, to, tag, head, pattern(from, to, i+int(tag), sz)); err != nil {
									t.Errorf("%d->%d tag %d: %v", from, to, tag, err)
									return
								}
							}
						})
						wg.Go(func() {
							for i, sz := range sizes {
								h, p, err := ws[to].RecvPort(ctx, from, tag)
								if err != nil {
									t.Errorf("%d<-%d tag %d: %v", to, from, tag, err)
									return
								}
								if !bytes.Equal(h, []byte{byte(i), byte(tag)}) || !bytes.Equal(p, pattern(from, to, i+int(tag), sz)) {
									t.Errorf("%d<-%d tag %d message %d: head %v, %d bytes; want %d bytes", to, from, tag, i, h, len(p), sz)
									return
								}
								if i%2 == 1 {
									h, p, err := ws[to].RecvPort(ctx, from, tag)
									if err != nil || !bytes.Equal(h, []byte{0xEE, byte(i)}) || len(p) != 0 {
										t.Errorf("%d<-%d tag %d the pair of message %d: head %v, %d bytes, %v", to, from, tag, i, h, len(p), err)
										return
									}
								}
							}
						})
					}
				}
			}
			wg.Wait()
			if ws[0].Provider() != prov {
				t.Errorf("provider %q, want %q", ws[0].Provider(), prov)
			}
		})
	}
}

// BenchmarkStream measures one-way messages of 4 MiB between two wires of
// this process over tcp;ofi_rxm.
func BenchmarkStream(b *testing.B) {
	ws := benchWires(b)
	data := make([]byte, 4<<20)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	done := make(chan struct{})
	go func() {
		for range b.N {
			if _, _, err := ws[1].RecvPort(ctx, 0, 7); err != nil {
				b.Error(err)
			}
		}
		close(done)
	}()
	for range b.N {
		if err := ws[0].SendPort(ctx, 1, 7, nil, data); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

// TestCloseWithWritesQueued closes rank 0 of two, of one process, while
// its writes wait in rank 1's queue (the test holds rank 1's lock, so
// its progress loop stops). With shm, endpoints of one process share
// their memory: a rank that freed its endpoint before its peer stopped
// touching it crashed the peer (SIGSEGV in libfabric's progress or
// inject). Close now waits for every peer's answer to its farewell.
func TestCloseWithWritesQueued(t *testing.T) {
	for _, prov := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			ws := openAll(t, 2, prov, 64<<10)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ws[1].mu.Lock()
			for i := range 4 {
				if err := ws[0].SendPort(ctx, 1, 5, []byte{byte(i)}, make([]byte, 100)); err != nil {
					t.Fatal(err)
				}
			}
			go func() {
				time.Sleep(50 * time.Millisecond)
				ws[1].mu.Unlock()
			}()
			if err := ws[0].Close(); err != nil {
				t.Fatal(err)
			}
			// Rank 1 learnt of the close: its send to rank 0 fails, named.
			err := ws[1].SendPort(ctx, 0, 7, nil, nil)
			if err == nil || !strings.Contains(err.Error(), "rank 0 closed its wire") {
				t.Errorf("rank 1 sending to the closed rank 0: %v, want an error that says it closed", err)
			}
		})
	}
}

// TestCloseUnderTraffic has two ranks of one process put large and small
// messages at each other, several senders and a receiver per direction,
// then close both wires at once while the traffic is in full flow: every
// Close, send and receive must end (a send or receive with an error)
// within the bound, and the wires' memory must be released (Close
// returns nil). Rings of 256 KiB make the senders wait for credits, and
// large messages go in several records from the caller's memory.
func TestCloseUnderTraffic(t *testing.T) {
	for _, prov := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			for round := range 3 {
				closeUnderTraffic(t, prov, round)
			}
		})
	}
}

func closeUnderTraffic(t *testing.T, prov string, round int) {
	t.Helper()
	const bound = 20 * time.Second
	ws := openAll(t, 2, prov, 256<<10)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for r := range 2 {
		peer := 1 - r
		for s, size := range []int{8, 100 << 10, 700 << 10} {
			wg.Go(func() {
				data := pattern(r, peer, s, size)
				for i := 0; ; i++ {
					var err error
					if i%2 == 0 {
						err = ws[r].SendPort(ctx, peer, uint32(10+s), []byte{byte(i)}, data)
					} else {
						err = ws[r].SendPort2(ctx, peer, uint32(10+s), []byte{byte(i)}, data, []byte{1})
					}
					if err != nil {
						return // the wire closed under it
					}
					mu.Lock()
					sent++
					mu.Unlock()
				}
			})
			wg.Go(func() {
				for {
					if _, _, err := ws[peer].RecvPort(ctx, r, uint32(10+s)); err != nil {
						return
					}
				}
			})
		}
	}
	// Let the traffic flow, then close both at once.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := sent
		mu.Unlock()
		if n >= 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	errs := make([]error, 2)
	var cw sync.WaitGroup
	for r := range 2 {
		cw.Go(func() { errs[r] = ws[r].Close() })
	}
	done := make(chan struct{})
	go func() { cw.Wait(); wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("round %d: closing both wires under two-way traffic: Close, a send or a receive still waits after %v", round, bound)
	}
	if ctx.Err() != nil {
		t.Fatalf("round %d: the traffic ended by the test's timeout, not by Close", round)
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("round %d: rank %d: Close: %v", round, r, err)
		}
	}
}

// TestStagingWithoutHMEM: tcp offers no FI_HMEM here, so a wire over it
// registers device memory through its staging rings and refuses to
// register it as itself, naming why; host memory always stages. The
// transfers of TestMessages are that staging path.
func TestStagingWithoutHMEM(t *testing.T) {
	ws := openAll(t, 2, "tcp;ofi_rxm", 64<<10)
	if r := ws[0].RegistrationFor(0); !r.Staging {
		t.Fatalf("tcp: device memory: %+v, want the staging rings", r)
	}
	if r := ws[0].RegistrationFor(noDevice); !r.Staging {
		t.Fatalf("tcp: host memory: %+v, want the staging rings", r)
	}
	var b [64]byte
	if _, _, err := ws[0].RegisterDevice(unsafe.Pointer(&b[0]), 64, 0); err == nil || !strings.Contains(err.Error(), "offers no FI_HMEM") {
		t.Fatalf("RegisterDevice over tcp: %v, want a refusal that names FI_HMEM", err)
	}
}

// benchWires opens two wires of this process over tcp;ofi_rxm for a
// benchmark, or skips.
func benchWires(b *testing.B) []*Wire {
	b.Helper()
	if _, err := Available("tcp;ofi_rxm"); err != nil {
		b.Skip(err)
	}
	h := newHub(2)
	ws := make([]*Wire, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			var err error
			ws[r], err = Open(context.Background(), hubNet{h, r}, Options{Provider: "tcp;ofi_rxm"})
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	b.Cleanup(func() {
		ws[0].Close()
		ws[1].Close()
	})
	return ws
}

// BenchmarkRoundTrip measures an 8-byte message with a header-only second
// one (a put with its signal) from rank 0 answered by one from rank 1.
func BenchmarkRoundTrip(b *testing.B) {
	ws := benchWires(b)
	ctx := context.Background()
	head, data := make([]byte, 24), make([]byte, 8)
	errc := make(chan error, 1)
	b.ResetTimer()
	go func() {
		for range b.N {
			for range 2 {
				if _, _, err := ws[1].RecvPort(ctx, 0, 7); err != nil {
					errc <- err
					return
				}
			}
			if err := ws[1].SendPort2(ctx, 0, 7, head, data, head[:8]); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range b.N {
		if err := ws[0].SendPort2(ctx, 1, 7, head, data, head[:8]); err != nil {
			b.Fatal(err)
		}
		for range 2 {
			if _, _, err := ws[0].RecvPort(ctx, 1, 7); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPutFlush measures one-way puts of 4 and 8 MiB, each followed
// by a header-only message answered by the receiver (a flush), between
// two wires of this process over tcp;ofi_rxm.
func BenchmarkPutFlush(b *testing.B) {
	for _, size := range []int{4 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			ws := benchWires(b)
			ctx := context.Background()
			data := make([]byte, size)
			dst := make([]byte, size)
			b.SetBytes(int64(size))
			errc := make(chan error, 1)
			b.ResetTimer()
			go func() {
				for range b.N {
					_, p, err := ws[1].RecvPort(ctx, 0, 7)
					if err == nil {
						copy(dst, p)
						_, _, err = ws[1].RecvPort(ctx, 0, 7)
					}
					if err == nil {
						err = ws[1].SendPort(ctx, 0, 8, nil, nil)
					}
					if err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for range b.N {
				if err := ws[0].SendPort(ctx, 1, 7, nil, data); err != nil {
					b.Fatal(err)
				}
				if err := ws[0].SendPort(ctx, 1, 7, nil, nil); err != nil {
					b.Fatal(err)
				}
				if _, _, err := ws[0].RecvPort(ctx, 1, 8); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestStreamedMessages sends messages of several records, of more than a
// ring among them, and checks that each arrives whole, that the progress
// loop copied none of their bytes (the receiver copies them as they
// arrive: before, a message of more than half a ring was copied in the
// loop, holding up every other peer's messages), and that the receiver
// copies them into one buffer it reuses (no allocation per message).
func TestStreamedMessages(t *testing.T) {
	const ring = 256 << 10
	ws := openAll(t, 2, "tcp;ofi_rxm", ring)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sizes := []int{100 << 10, ring/2 + 1000, 3*ring + 64, 1 << 20, 1 << 20}
	errc := make(chan error, 1)
	go func() {
		for i, n := range sizes {
			if err := ws[0].SendPort2(ctx, 1, 9, []byte{byte(i)}, pattern(0, 1, i, n), []byte{0xee}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var last []byte
	for i, n := range sizes {
		head, got, err := ws[1].RecvPort(ctx, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		if len(head) != 1 || head[0] != byte(i) || !bytes.Equal(got, pattern(0, 1, i, n)) {
			t.Fatalf("message %d of %d bytes: header %v, %d bytes, not what was sent", i, n, head, len(got))
		}
		if i > 0 && len(got) <= cap(last) && &got[0] != &last[0] {
			t.Errorf("message %d of %d bytes: a new buffer, not the one of the message before (%d bytes)", i, n, cap(last))
		}
		last = got[:cap(got)]
		if head2, _, err := ws[1].RecvPort(ctx, 0, 9); err != nil || !bytes.Equal(head2, []byte{0xee}) {
			t.Fatalf("message %d: the pair's second message: %v, %v", i, head2, err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := ws[1].loopCopied.Load(); c != 0 {
		t.Errorf("the progress loop copied %d bytes of messages of several records; want 0", c)
	}
}

// TestRecvPortTo checks that a message of several records goes straight
// into the memory dest gives (the payload returned is that memory), that
// one of one record and one dest declines are handed over as by RecvPort,
// and that the bytes are the ones sent.
func TestRecvPortTo(t *testing.T) {
	const ring = 256 << 10
	ws := openAll(t, 2, "tcp;ofi_rxm", ring)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cases := []struct {
		n       int
		decline bool
		placed  bool
	}{{ring + 100, false, true}, {1000, false, false}, {ring / 2, true, false}, {3 * ring, false, true}}
	errc := make(chan error, 1)
	go func() {
		for i, c := range cases {
			if err := ws[0].SendPort(ctx, 1, 9, []byte{byte(i)}, pattern(0, 1, i, c.n)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, c := range cases {
		dst := make([]byte, c.n)
		called := false
		_, got, err := ws[1].RecvPortTo(ctx, 0, 9, func(head []byte, n int) []byte {
			called = true
			if len(head) != 1 || head[0] != byte(i) || n != c.n {
				t.Errorf("message %d: dest asked for header %v, %d bytes", i, head, n)
			}
			if c.decline {
				return nil
			}
			return dst
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, pattern(0, 1, i, c.n)) {
			t.Fatalf("message %d of %d bytes: not what was sent", i, c.n)
		}
		if placed := len(got) > 0 && &got[0] == &dst[0]; placed != c.placed {
			t.Errorf("message %d of %d bytes (dest asked: %v): written into dest %v, want %v", i, c.n, called, placed, c.placed)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestReceiverWokenForItsTraffic checks that a receiver waiting for a
// message is woken by its own traffic only: one receiver waits on a tag
// while 200 messages come and go on another. Before, every batch of
// completions woke every receiver and sender of the process (one channel
// for every change), which on 2 cores shared by 4 processes cost a
// wake-up of each waiting goroutine per message.
func TestReceiverWokenForItsTraffic(t *testing.T) {
	ws := openAll(t, 2, "tcp;ofi_rxm", 256<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const idle, busy, n = 7, 8, 200
	errc := make(chan error, 1)
	go func() {
		head, _, err := ws[1].RecvPort(ctx, 0, idle)
		if err == nil && !bytes.Equal(head, []byte{0xaa}) {
			err = fmt.Errorf("the waiting receiver got header %v, want [0xaa]", head)
		}
		errc <- err
	}()
	// The waiter's queue exists once it waits (or is about to).
	for {
		ws[1].mu.Lock()
		_, ok := ws[1].queues[qkey{idle, 0}]
		ws[1].mu.Unlock()
		if ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the receiver on the idle tag did not start")
		}
		time.Sleep(time.Millisecond)
	}
	go func() {
		for i := range n {
			if _, _, err := ws[1].RecvPort(ctx, 0, busy); err != nil {
				errc <- err
				return
			}
			if err := ws[1].SendPort(ctx, 0, busy, []byte{byte(i)}, make([]byte, 64)); err != nil {
				errc <- err
				return
			}
		}
	}()
	for i := range n {
		if err := ws[0].SendPort(ctx, 1, busy, []byte{byte(i)}, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ws[0].RecvPort(ctx, 1, busy); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws[0].SendPort(ctx, 1, idle, []byte{0xaa}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	ws[1].mu.Lock()
	idleWakes, busyWakes := ws[1].queues[qkey{idle, 0}].wakes, ws[1].queues[qkey{busy, 0}].wakes
	ws[1].mu.Unlock()
	if idleWakes != 0 {
		t.Errorf("the receiver on tag %d woke %d times for nothing while %d messages went both ways on tag %d; want 0", idle, idleWakes, n, busy)
	}
	t.Logf("wake-ups for nothing: idle receiver %d, busy receiver %d", idleWakes, busyWakes)
}

// TestIdleLoopSleeps checks that the progress loop of a quiet wire stays
// asleep on the completion queue's wait object: a sleep that ends at its
// bound is no activity. Before, every bound (10 ms) sent the loop back
// into 100 us of spinning and 2 ms of polling, on every rank of a job
// between its launches.
func TestIdleLoopSleeps(t *testing.T) {
	ws := openAll(t, 2, "tcp;ofi_rxm", 64<<10)
	if ws[0].cqConn == nil {
		t.Skip("tcp;ofi_rxm here has no wait object: the loop polls")
	}
	// Wait until the loop sleeps (after the set-up's spin and polls).
	deadline := time.Now().Add(10 * time.Second)
	for !ws[0].sleeping.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the progress loop of a quiet wire did not go to sleep within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	before := ws[0].spins.Load()
	time.Sleep(5 * blockFor)
	if n := ws[0].spins.Load() - before; n != 0 {
		t.Errorf("the progress loop of a quiet wire spun %d times in %v (%d sleeps of at most %v); want 0", n, 5*blockFor, 5, blockFor)
	}
}

// TestSpinGauge checks when the progress loop spins after a completion:
// where completions follow each other within spinFor (a round trip),
// not where most are 0.1 to 2 ms apart (a plan of 4 processes on 2
// cores), whatever the idle time between bursts, and that it comes back
// to spinning when a round trip starts.
func TestSpinGauge(t *testing.T) {
	us := time.Microsecond
	roundTrip := []time.Duration{30 * us}
	plan := []time.Duration{30 * us, 300 * us, 800 * us, 60 * us, 1500 * us} // 40% within spinFor
	// Without the spin: a round trip's gaps grow to about 200 us, a
	// plan's stay mostly over recoverFor (half of them here).
	slowTrip := []time.Duration{40 * us, 180 * us}
	slowPlan := []time.Duration{30 * us, 40 * us, 90 * us, 180 * us, 350 * us, 700 * us, 1500 * us, 400 * us}
	cases := []struct {
		name   string
		phases [][]time.Duration // each repeated reps times
		reps   int
		want   bool
	}{
		{"a round trip", [][]time.Duration{roundTrip}, 100, true},
		{"a plan", [][]time.Duration{plan}, 40, false},
		{"a round trip with idle time between bursts", [][]time.Duration{roundTrip, {50 * time.Millisecond}}, 100, true},
		{"a round trip after a plan", [][]time.Duration{plan, roundTrip}, 20, true},
		{"a plan after a round trip", [][]time.Duration{roundTrip, plan}, 20, false},
		{"a plan without the spin", [][]time.Duration{plan, slowPlan}, 20, false},
		{"at the start", nil, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newSpinGauge()
			now := time.Unix(0, 0)
			for _, phase := range c.phases {
				for range c.reps {
					for _, gap := range phase {
						now = now.Add(gap)
						g.observe(now)
					}
				}
			}
			if got := g.worth(); got != c.want {
				t.Errorf("worth() = %v (average %.2f), want %v", got, g.hits, c.want)
			}
		})
	}
	// A round trip that starts where the loop does not spin (after a
	// plan) brings it back to spinning within a few round trips.
	g := newSpinGauge()
	now := time.Unix(0, 0)
	for range 20 {
		for _, gap := range plan {
			now = now.Add(gap)
			g.observe(now)
		}
	}
	n := 0
	for ; n < 20 && !g.worth(); n++ {
		for _, gap := range slowTrip {
			now = now.Add(gap)
			g.observe(now)
		}
	}
	if !g.worth() {
		t.Errorf("a round trip without the spin (gaps %v) did not bring the loop back to spinning in %d round trips (average %.2f)", slowTrip, n, g.hits)
	}
}

// TestSmallRecordsInjected checks that a record the provider can inject
// (a header-only message: a FLAG, a FENCE, an answer) leaves no
// completion to read, and that a larger one does: before, every write
// left one, which woke the progress loop once more per message.
func TestSmallRecordsInjected(t *testing.T) {
	ws := openAll(t, 2, "tcp;ofi_rxm", 256<<10)
	if ws[0].injectMax < recHead+8 {
		t.Skipf("the provider injects %d bytes, a FLAG's record is %d", ws[0].injectMax, recHead+8)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 100
	for i := range n {
		head := []byte{2, 0, 0, 0, byte(i), 0, 0, 0}
		if err := ws[0].SendPort(ctx, 1, 9, head, nil); err != nil {
			t.Fatal(err)
		}
		got, _, err := ws[1].RecvPort(ctx, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, head) {
			t.Fatalf("message %d: header %v, want %v", i, got, head)
		}
	}
	if c := ws[0].completions.Load(); c != 0 {
		t.Errorf("%d header-only messages left %d completions to read, want 0 (injected)", n, c)
	}
	// A record above the inject size completes through the queue.
	if err := ws[0].SendPort(ctx, 1, 9, []byte{1}, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws[1].RecvPort(ctx, 0, 9); err != nil {
		t.Fatal(err)
	}
	for ws[0].completions.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the write of 1 KiB never completed through the queue")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLargeSendsAssisted checks that a sender of a large payload (written
// from its memory) reads its write's completion itself where the
// progress loop has not: with the tcp provider a write the socket took
// whole has completed when it is posted.
func TestLargeSendsAssisted(t *testing.T) {
	ws := openAll(t, 2, "tcp;ofi_rxm", 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		// Until the small message that ends the test, whose receive
		// releases the ring memory of the large one before it.
		for {
			head, _, err := ws[1].RecvPort(ctx, 0, 9)
			if err != nil || head[0] == 2 {
				errc <- err
				return
			}
		}
	}()
	// Whether a sender finds its completion depends on the scheduling
	// of the moment (a loaded machine may deschedule it past assistFor):
	// at least 20 sends, and more, up to 500, until one did.
	data := make([]byte, directBytes)
	n := 0
	for ; n < 500 && (n < 20 || ws[0].assisted.Load() == 0); n++ {
		data[0] = byte(n)
		if err := ws[0].SendPort(ctx, 1, 9, []byte{1}, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws[0].SendPort(ctx, 1, 9, []byte{2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if a := ws[0].assisted.Load(); a == 0 {
		t.Errorf("none of %d sends of %d bytes read its own completion, want some", n, directBytes)
	} else {
		t.Logf("%d of %d sends read their own completion", a, n)
	}
}

// TestSendPortAt writes payloads straight into a peer's registered memory
// and checks that each message arrives with its payload in place (the
// writes to a peer are in order), at several offsets and sizes, over tcp
// and shm.
func TestSendPortAt(t *testing.T) {
	for _, prov := range []string{"tcp;ofi_rxm", "shm"} {
		t.Run(strings.Split(prov, ";")[0], func(t *testing.T) {
			ws := openAll(t, 2, prov, 256<<10)
			if !ws[0].CanPlace() {
				t.Skipf("%s cannot write into a peer's memory directly", prov)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			mem := make([]byte, 4<<20)
			addr, key, release, err := ws[1].RegisterPlace(mem)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := release(); err != nil {
					t.Error(err)
				}
			}()
			sizes := []int{1, 100, 64 << 10, 1 << 20, 3<<20 + 7}
			for i := range 20 {
				n := sizes[i%len(sizes)]
				off := (i * 4099) % (len(mem) - n)
				data := pattern(0, 1, i, n)
				if err := ws[0].SendPortAt(ctx, 1, 9, []byte{byte(i)}, data, []byte{0xf0, byte(i)}, addr+uint64(off), key); err != nil {
					t.Fatal(err)
				}
				head, payload, err := ws[1].RecvPort(ctx, 0, 9)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(head, []byte{byte(i)}) || len(payload) != 0 {
					t.Fatalf("message %d: header %v and %d bytes of payload, want [%d] and none", i, head, len(payload), i)
				}
				if !bytes.Equal(mem[off:off+n], data) {
					t.Fatalf("message %d: the %d bytes at %d are not in place when it arrives", i, n, off)
				}
				if head2, _, err := ws[1].RecvPort(ctx, 0, 9); err != nil || !bytes.Equal(head2, []byte{0xf0, byte(i)}) {
					t.Fatalf("message %d: second message %v, %v", i, head2, err)
				}
			}
			if c := ws[1].loopCopied.Load(); c != 0 {
				t.Errorf("the receiver's loop copied %d payload bytes, want 0", c)
			}
		})
	}
}
