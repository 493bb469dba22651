// This file holds the throughput benchmark of Send/Recv over loopback TCP
// against a plain net.Conn copy of the same bytes, measured in the same
// run.

package bootstrap

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkSendRecv64MiB sends 64 MiB messages from rank 0 to rank 1 of a
// two-rank job on 127.0.0.1 and, in the same iterations, copies the same
// bytes over a plain loopback net.Conn: into a buffer reused every time
// (tcp, the best case) and into a fresh buffer (tcp-alloc, what Recv
// does, since it returns a new slice). It reports the throughput of each
// and the ratio bootstrap/tcp.
func BenchmarkSendRecv64MiB(b *testing.B) {
	const size = 64 << 20
	bs := startWorld(b, 2, Options{Timeout: 30 * time.Second})
	ctx := context.Background()
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		b.Fatal("accept failed")
	}
	defer server.Close()
	buf := make([]byte, size)

	// copyTCP writes msg on client and reads it into dst on server.
	copyTCP := func(dst []byte) time.Duration {
		start := time.Now()
		werr := make(chan error, 1)
		go func() {
			_, err := client.Write(msg)
			werr <- err
		}()
		if _, err := io.ReadFull(server, dst); err != nil {
			b.Fatal(err)
		}
		if err := <-werr; err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	sendRecv := func() time.Duration {
		start := time.Now()
		serr := make(chan error, 1)
		go func() { serr <- bs[0].Send(ctx, 1, 0, msg) }()
		got, err := bs[1].Recv(ctx, 0, 0)
		if err != nil || len(got) != size || got[size-1] != msg[size-1] {
			b.Fatalf("Recv: %d bytes, %v", len(got), err)
		}
		if err := <-serr; err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	sendRecv() // open the data link outside the measurement
	copyTCP(buf)

	var boot, tcp, tcpAlloc time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		boot += sendRecv()
		tcp += copyTCP(buf)
		tcpAlloc += copyTCP(make([]byte, size))
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(boot), "bootstrap-MB/s")
	b.ReportMetric(mbps(tcp), "tcp-MB/s")
	b.ReportMetric(mbps(tcpAlloc), "tcp-alloc-MB/s")
	b.ReportMetric(tcp.Seconds()/boot.Seconds(), "bootstrap/tcp")
	b.ReportMetric(tcpAlloc.Seconds()/boot.Seconds(), "bootstrap/tcp-alloc")
	b.ReportMetric(0, "ns/op") // the three are in one iteration: see the metrics
}
