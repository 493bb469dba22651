package multiproc

// fabric_bench_test.go: `make bench-fabric`. The busbw of port-channel
// plans run one process per rank over two logical hosts, over the TCP
// wire and over libfabric's tcp provider side by side (alltoallv_port
// bound to mixture-of-experts counts among them), and the
// per-message cost of each: an 8-byte put with signal answered by one,
// through rankwire's Sender and Receive, and the throughput of 4 MiB
// puts each followed by a flush. Runs only with MSCCLGO_FABRIC_BENCH=1;
// it prints, it asserts no speed. Each figure is the best of three
// rounds.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	planfmt "github.com/mscclgo/mscclgo/plan"
)

func TestFabricBench(t *testing.T) {
	mode := os.Getenv("MSCCLGO_FABRIC_BENCH")
	if mode != "1" && mode != "wire" {
		t.Skip("the fabric benchmark runs with MSCCLGO_FABRIC_BENCH=1 (make bench-fabric; =wire: the wire alone)")
	}
	needFabric(t, "tcp;ofi_rxm")
	t.Setenv("FI_PROVIDER", "tcp")
	var lines []string
	out := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	out("%-44s %14s %14s %8s", "port channels between 2 hosts (4 processes)", "tcp wire", "fabric tcp", "ratio")

	dir := t.TempDir()
	// The launches of allreduce_hier 4M take about 10 ms: 40 of them a
	// round, so that a round's figure is not one scheduling hiccup.
	plans := []struct{ algo, size, iters string }{{"allreduce_hier", "4M", "40"}, {"allreduce_hier", "32M", "10"}, {"allgather_hier", "16M", "10"}, {"reducescatter_hier", "16M", "10"}}
	if mode == "wire" {
		plans = nil
	}
	// Each figure is the best of three rounds that alternate the two
	// transports: the machine is shared and noisy.
	const rounds = 3
	// Beside each busbw, the CPU seconds of a run (user and system time
	// of its 4 processes together, the least of the rounds) and its wall
	// time: on 2 cores shared by 4 processes CPU is what the transports
	// compete for. The row of one launch is mostly the job's start and
	// end (loading libfabric, the endpoint, the hello, the farewell), to
	// be set against the others' per-launch part.
	var cpuLines []string
	runPlan := func(name string, args []string, scale float64) {
		var bw [2]float64
		cpu := [2]time.Duration{1 << 62, 1 << 62}
		wall := [2]time.Duration{1 << 62, 1 << 62}
		for range rounds {
			for i, tr := range []string{"tcp", "fabric"} {
				start := time.Now()
				procs := runHosts(t, 4, 2, nil, append(args, "--transport", tr)...)
				el := time.Since(start)
				got := succeeded(t, procs)
				rows := tableRows(got)
				if len(rows) != 1 || rows[0][len(rows[0])-1] != "0" {
					t.Fatalf("%s: %s", name, got)
				}
				v, _ := strconv.ParseFloat(rows[0][len(rows[0])-2], 64)
				bw[i] = max(bw[i], v*scale)
				var c time.Duration
				for _, pr := range procs {
					c += pr.cpu
				}
				cpu[i], wall[i] = min(cpu[i], c), min(wall[i], el)
			}
		}
		if scale > 0 {
			out("%-44s %9.3f GB/s %9.3f GB/s %7.2fx", name+" busbw", bw[0], bw[1], bw[1]/bw[0])
		}
		cpuLines = append(cpuLines, fmt.Sprintf("%-44s %6.2f / %5.2f s %6.2f / %5.2f s %7.2fx", name+" cpu / wall", cpu[0].Seconds(), wall[0].Seconds(),
			cpu[1].Seconds(), wall[1].Seconds(), cpu[1].Seconds()/cpu[0].Seconds()))
	}
	for _, c := range plans {
		p := evalPlan(t, dir, c.algo, "world_size=4", "ranks_per_node=2")
		runPlan(c.algo+" "+c.size, []string{"run", p, "-d", "float", "--size", c.size, "-n", c.iters, "-w", "2", "--timeout", "30s"}, 1)
	}
	if mode != "wire" {
		// alltoallv_port bound to mixture-of-experts counts (16 MiB of
		// float): busbw is algbw × (n-1)/n, as for alltoall.
		const counts = "moe:tokens=1024,hidden=512"
		p := evalPlan(t, dir, "alltoallv_port", "world_size=4", "ranks_per_node=2")
		runPlan("alltoallv_port moe 16M", []string{"run", p, "-d", "float", "--counts", counts, "-n", "10", "-w", "2", "--timeout", "30s"}, 3.0/4)
		p = evalPlan(t, dir, "allreduce_hier", "world_size=4", "ranks_per_node=2")
		runPlan("1 launch of allreduce_hier 4M", []string{"run", p, "-d", "float", "--size", "4M", "-n", "1", "-w", "0", "--timeout", "30s"}, 0)
	}

	// The wire alone, between two ranks of this process.
	bs, err := bootstrap.ConnectLocal(context.Background(), 2, t.TempDir(), bootstrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bootstrap.CloseAll(bs)
	ws := make([]*fabric.Wire, 2)
	errs := make([]error, 2)
	done := make(chan int)
	for r := range 2 {
		go func() { ws[r], errs[r] = fabric.Open(context.Background(), bs[r], fabric.Options{}); done <- r }()
	}
	<-done
	<-done
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	nets := [2][2]rankwire.Net{{bs[0], bs[1]}, {ws[0], ws[1]}}
	rtt := [2]float64{1e18, 1e18}
	var tput [2]float64
	for range rounds {
		for i, nt := range nets {
			rtt[i] = min(rtt[i], pingPong(t, nt, 1000))
			tput[i] = max(tput[i], stream(t, nt, 4<<20, 30))
		}
	}
	out("%-44s %11.1f us %11.1f us %7.2fx", "8 B put+signal round trip", rtt[0], rtt[1], rtt[0]/rtt[1])
	out("%-44s %9.3f GB/s %9.3f GB/s %7.2fx", "4 MiB put + flush, one direction", tput[0], tput[1], tput[1]/tput[0])
	if len(cpuLines) > 0 {
		lines = append(lines, "", fmt.Sprintf("%-44s %16s %16s %8s", "CPU s of a run (4 processes) / its wall s", "tcp wire", "fabric tcp", "ratio"))
		lines = append(lines, cpuLines...)
	}
	fmt.Println(strings.Join(lines, "\n"))
}

// pingPong returns the mean round trip, in microseconds, of an 8-byte put
// with signal (SendDataFlag: one transfer over the fabric, two messages
// over the TCP wire) from rank 0 answered by one from rank 1.
func pingPong(t *testing.T, nt [2]rankwire.Net, n int) float64 {
	t.Helper()
	ctx := context.Background()
	const tag = 5000
	errc := make(chan error, 1)
	go func() {
		s := rankwire.NewSender(nt[1], tag)
		for range n {
			for range 2 {
				if _, err := rankwire.Receive(ctx, nt[1], tag, 0); err != nil {
					errc <- err
					return
				}
			}
			if err := s.SendDataFlag(ctx, 0, planfmt.Output, 0, false, make([]byte, 8), 0); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	s := rankwire.NewSender(nt[0], tag)
	start := time.Now()
	for range n {
		if err := s.SendDataFlag(ctx, 1, planfmt.Output, 0, false, make([]byte, 8), 0); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := rankwire.Receive(ctx, nt[0], tag, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	el := time.Since(start)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return float64(el.Microseconds()) / float64(n)
}

// stream returns the rate, in GB/s, of n puts of size bytes from rank 0
// to rank 1 (applied to rank 1's buffer), each followed by a flush.
func stream(t *testing.T, nt [2]rankwire.Net, size, n int) float64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const tag = 6000
	// The receiver applies each put to its buffer, as the backends'
	// receivers do: over the fabric, written there as it arrives where
	// the wire can (ReceiveTo), else copied.
	go func() {
		dst := make([]byte, size)
		place := func(_ planfmt.BufferType, off, n uint64, _ bool) []byte {
			if off+n > uint64(len(dst)) {
				return nil
			}
			return dst[off : off+n]
		}
		for {
			m, err := rankwire.ReceiveTo(ctx, nt[1], tag, 0, place)
			if err != nil {
				return
			}
			if m.Kind == rankwire.Data && !m.Placed {
				copy(dst[m.Offset:], m.Bytes)
			}
		}
	}()
	s := rankwire.NewSender(nt[0], tag)
	data := make([]byte, size)
	start := time.Now()
	for range n {
		if err := s.SendData(ctx, 1, planfmt.Output, 0, false, data); err != nil {
			t.Fatal(err)
		}
		if err := s.Fence(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return float64(size*n) / time.Since(start).Seconds() / 1e9
}
