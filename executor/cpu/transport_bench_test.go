package cpu

// transport_bench_test.go measures the port-channel transport between
// rank sessions (two logical hosts, loopback TCP through package bootstrap)
// against a plain TCP copy of the same bytes in the same run:
//
//	go test ./executor/cpu -run XXX -bench 'PortTransport|PlainTCP' -benchtime 20x
//
// The ratio of the two MB/s figures is the transport's efficiency.

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/plan"
)

const benchBytes = 64 << 20

// BenchmarkPortTransport: rank 0 puts 64 MiB into rank 1's output
// through a port channel (put with signal, then flush), rank 1 waits;
// the ranks are on different logical hosts, so the bytes cross TCP.
func BenchmarkPortTransport(b *testing.B) {
	bd := newBuilder(2, 0)
	c0, c1 := bd.connect(plan.Port, 0, 1)
	const n = benchBytes
	bd.tb(0, op(plan.OpPutWithSignal, plan.Port, ch(c0), rs(L(plan.Input, 0, n)), rs(R(1, plan.Output, 0, n))),
		op(plan.OpFlush, plan.Port, ch(c0), nil, nil))
	bd.tb(1, wt(plan.Port, c1))
	lay, err := executor.Layout("test", 2, n, executor.Float32, false)
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "rank0.addr")
	sess := make([]*RankSession, 2)
	bs := make([]*bootstrap.Bootstrap, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 {
		wg.Go(func() {
			w := bootstrap.World{Rank: r, Size: 2, RendezvousFile: file, RendezvousHost: "127.0.0.1", Host: "h"}
			if bs[r], errs[r] = bootstrap.Connect(context.Background(), w, bootstrap.Options{Timeout: 20 * time.Second}); errs[r] != nil {
				return
			}
			sess[r], errs[r] = OpenRank(context.Background(), bd.inst, lay, executor.Options{DType: f32{}, DeadlockTimeout: 10 * time.Second},
				rankwire.World{Net: bs[r], Host: []int{0, 1}, Tag: 10})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for r := range 2 {
			sess[r].Close()
			bs[r].Close()
		}
	}()
	b.SetBytes(n)
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() { errs[r] = sess[r].Launch(context.Background()) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPlainTCP copies 64 MiB over one loopback TCP connection and
// waits for a one-byte answer: the floor of BenchmarkPortTransport.
func BenchmarkPlainTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		dst := make([]byte, benchBytes)
		for {
			if _, err := io.ReadFull(c, dst); err != nil {
				return
			}
			if _, err := c.Write([]byte{1}); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	src := make([]byte, benchBytes)
	ack := make([]byte, 1)
	b.SetBytes(benchBytes)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(src); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, ack); err != nil {
			b.Fatal(err)
		}
	}
}
