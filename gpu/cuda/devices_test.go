//go:build cuda

package cuda

// devices_test.go tests a one-process session on several devices (the
// shape of `mscclgo run --backend gpu` without a launcher on a machine
// with several GPUs): rank r on device r mod N, peer access enabled
// between the devices, refused with the pair named where the machine has
// none, and every byte equal to the CPU backend's.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorgonia.org/cu"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
)

// countingOpen opens devices from testNode and counts the opens per
// device.
type countingOpen struct {
	mu    sync.Mutex
	opens map[int]int
}

func (c *countingOpen) open(device int) (gpu.Driver, error) {
	c.mu.Lock()
	c.opens[device]++
	c.mu.Unlock()
	return testNode.Open(device)
}

// devicesBackend is the CLI's one-process backend: every device the
// driver reports.
func devicesBackend(c *countingOpen) executor.Backend {
	return gpu.New(gpu.Config{Name: "gpu", Threads: testThreads(), Open: func() (gpu.Driver, error) { return testNode.Open(0) },
		Devices: Devices, OpenDevice: c.open})
}

func TestOneProcessDevices(t *testing.T) {
	plans := []string{
		"single_node/allreduce.plan.json",     // memory channels, 8 ranks
		"single_node/allgather_pkt.plan.json", // LL packets
		"single_node/allreduce_nvls_zero_copy.plan.json",
		"unit_tests/put/put_with_signal_and_flush_test.plan.json", // port channels: the proxies
	}
	for _, tc := range []struct {
		name    string
		devices int
		nopeer  string
		refuse  string // "": must run and match the CPU backend
	}{
		{name: "2", devices: 2},
		{name: "4", devices: 4},
		{name: "8", devices: 8},
		{name: "4-nopeer", devices: 4, nopeer: "1-3", refuse: "device 1 cannot access the memory of device 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{fmt.Sprintf("MSCCLGO_FAKECUDA_DEVICES=%d", tc.devices)}
			if tc.nopeer != "" {
				env = append(env, "MSCCLGO_FAKECUDA_NOPEER="+tc.nopeer)
			}
			if !rerun(t, env...) {
				return
			}
			n, err := Devices()
			if err != nil {
				t.Fatal(err)
			}
			if !fake() && (n != tc.devices || tc.refuse != "") {
				t.Skipf("the machine has %d devices and the peer access it has", n)
			}
			for _, f := range plans {
				plan, err := executor.LoadFile(filepath.Join("../../tests/ports", f))
				if err != nil {
					t.Fatal(err)
				}
				sizes := executor.CheckSizes(plan, executor.Float32, 1<<14, 1)
				if len(sizes) == 0 {
					t.Fatalf("%s: no float32 size up to 16 KiB", f)
				}
				co := &countingOpen{opens: map[int]int{}}
				c := gputest.Case{Plan: plan, Size: sizes[0], DType: executor.Float32, InPlace: plan.Inplace, Launches: 2,
					Timeout: 20 * time.Second}
				out, err := gputest.Run(context.Background(), devicesBackend(co), c)
				if tc.refuse != "" && len(plan.GPUs) < 4 {
					// Only devices 0 and 1, which have peer access.
					if err != nil || out != gputest.Same {
						t.Errorf("%s, %s: %v, %v; want the CPU backend's bytes", f, c, out, err)
					}
					continue
				}
				if tc.refuse != "" {
					if err == nil || !strings.Contains(err.Error(), tc.refuse) {
						t.Errorf("%s: %v, %v; want a refusal that says %q", f, out, err, tc.refuse)
					}
					continue
				}
				if err != nil || out != gputest.Same {
					t.Errorf("%s, %s: %v, %v; want the CPU backend's bytes", f, c, out, err)
					continue
				}
				// Rank r on device r mod N: the backend's one session
				// opened every device as often as it has ranks.
				ranks := len(plan.GPUs)
				want := map[int]int{}
				for r := range ranks {
					want[r%n]++
				}
				co.mu.Lock()
				got := fmt.Sprint(co.opens)
				co.mu.Unlock()
				if got != fmt.Sprint(want) {
					t.Errorf("%s: opens per device %s, want %s (rank r on device r mod %d)", f, got, fmt.Sprint(want), n)
				}
			}
			if tc.refuse != "" || !fake() {
				return
			}
			// The sessions enabled peer access between every pair of
			// devices: enabling it again is refused as already enabled.
			for a := range n {
				for b := range n {
					if a == b {
						continue
					}
					if err := enableAgain(a, b); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
}

// enableAgain enables device a's access to device b's memory and
// expects the driver to answer that it is enabled already.
func enableAgain(a, b int) error {
	d, err := testNode.Open(a)
	if err != nil {
		return err
	}
	defer d.Close()
	dv := d.(*driver)
	peer, err := cu.GetDevice(b)
	if err != nil {
		return err
	}
	pctx, err := peer.RetainPrimaryCtx()
	if err != nil {
		return err
	}
	defer peer.ReleasePrimaryCtx()
	err = dv.do("enabling peer access again", func() error { return pctx.EnablePeerAccess(0) })
	if !errors.Is(err, cu.PeerAccessAlreadyEnabled) {
		return fmt.Errorf("device %d to device %d: enabling peer access after the sessions: %v, want already enabled", a, b, err)
	}
	return nil
}
