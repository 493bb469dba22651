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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorgonia.org/cu"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
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
				sizes := harness.CheckSizes(plan, executor.Float32, 1<<14, 1)
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
			if tc.refuse != "" {
				return
			}
			// Buffers of another aliasing than the plan's: the session
			// reopens its rank sessions for their layout (every device
			// opened again).
			plan, err := executor.LoadFile("../../tests/ports/single_node/allreduce.plan.json")
			if err != nil {
				t.Fatal(err)
			}
			co := &countingOpen{opens: map[int]int{}}
			c := gputest.Case{Plan: plan, Size: 1 << 12, DType: executor.Float32, InPlace: !plan.Inplace, Launches: 2,
				Timeout: 20 * time.Second}
			if out, err := gputest.Run(context.Background(), devicesBackend(co), c); err != nil || out != gputest.Same {
				t.Errorf("allreduce, %s: %v, %v; want the CPU backend's bytes", c, out, err)
			}
			if want := 2 * len(plan.GPUs) / n; co.opens[0] != want {
				t.Errorf("allreduce, in-place %v: device 0 opened %d times, want %d (once more for the buffers' layout)", c.InPlace, co.opens[0], want)
			}
			if !fake() {
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

// TestMulticast runs NVLS plans in one process on several devices: with
// multicast on every device and a device per rank, each switch group
// gets a multicast object (created with the group's devices, each
// member's buffer bound at the granularity, mapped on each member's
// device, its address in the member's switch record, all of it undone
// at Close); with the attribute off, or ranks sharing a device, the
// unicast fallback runs and says why. The bytes equal the CPU backend's
// either way (the fake's g++-built kernel has no multimem path: it falls
// back even with an mc pointer, which it must not dereference).
func TestMulticast(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devices int
		mc      int
		want    string
	}{
		{name: "objects", devices: 8, mc: 1, want: "multimem through"},
		{name: "nomulticast", devices: 8, mc: 0, want: "has no NVLS multicast"},
		{name: "shared", devices: 4, mc: 1, want: "share device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "fakecuda.log")
			if !rerun(t, fmt.Sprintf("MSCCLGO_FAKECUDA_DEVICES=%d", tc.devices), fmt.Sprintf("MSCCLGO_FAKECUDA_MULTICAST=%d", tc.mc),
				"MSCCLGO_FAKECUDA_LOG="+log) {
				return
			}
			n, err := Devices()
			if err != nil {
				t.Fatal(err)
			}
			if !fake() && n != tc.devices {
				t.Skipf("the machine has %d devices", n)
			}
			log = os.Getenv("MSCCLGO_FAKECUDA_LOG")
			for _, f := range []string{"single_node/allreduce_nvls_zero_copy.plan.json", "single_node/allgather_nvls_zero_copy.plan.json"} {
				plan, err := executor.LoadFile(filepath.Join("../../tests/ports", f))
				if err != nil {
					t.Fatal(err)
				}
				sizes := harness.CheckSizes(plan, executor.Float32, 1<<14, 1)
				if len(sizes) == 0 {
					t.Fatalf("%s: no float32 size up to 16 KiB", f)
				}
				lay, err := executor.PlanLayout(plan, sizes[0], executor.Float32, plan.Inplace)
				if err != nil {
					t.Fatal(err)
				}
				inst, err := executor.Instantiate(plan, lay.Sizes)
				if err != nil {
					t.Fatal(err)
				}
				co := &countingOpen{opens: map[int]int{}}
				sess, err := devicesBackend(co).Open(inst, executor.Options{DType: executor.Float32})
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				got := sess.(interface{ NVLS() string }).NVLS()
				if !strings.Contains(got, tc.want) {
					t.Errorf("%s: NVLS %q, want one that says %q", f, got, tc.want)
				}
				if fake() {
					maps := readMaps(t, log)
					for r := range plan.GPUs {
						mcs, err := sess.(interface{ SwitchMC(int) ([]uint64, error) }).SwitchMC(r)
						if err != nil {
							t.Fatal(err)
						}
						for i, mc := range mcs {
							if in := maps.holds(mc, r%n); (tc.mc == 1 && tc.devices == 8) != in || (!in && mc != 0) {
								t.Errorf("%s: rank %d switch %d: mc pointer %#x, in a multicast mapping of device %d: %v",
									f, r, i, mc, r%n, in)
							}
						}
					}
				}
				if err := sess.Close(); err != nil {
					t.Fatal(err)
				}
				c := gputest.Case{Plan: plan, Size: sizes[0], DType: executor.Float32, InPlace: plan.Inplace, Launches: 2,
					Timeout: 20 * time.Second}
				if out, err := gputest.Run(context.Background(), devicesBackend(co), c); err != nil || out != gputest.Same {
					t.Errorf("%s, %s: %v, %v; want the CPU backend's bytes", f, c, out, err)
				}
			}
			if fake() {
				checkMulticastLog(t, log, tc.mc == 1 && tc.devices == 8)
			}
		})
	}
}

// mcMaps are the multicast mappings of the fake's log: address, size and
// the devices with access.
type mcMaps []struct {
	va, size uint64
	devs     map[int]bool
}

func (m mcMaps) holds(p uint64, dev int) bool {
	for _, x := range m {
		if p >= x.va && p < x.va+x.size && x.devs[dev] {
			return true
		}
	}
	return false
}

// readMaps returns the multicast mappings the log shows still mapped.
func readMaps(t *testing.T, log string) mcMaps {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out mcMaps
	for _, line := range strings.Split(string(b), "\n") {
		var h string
		var va, size uint64
		var dev int
		switch {
		case strings.HasPrefix(line, "mc map "):
			if _, err := fmt.Sscanf(line, "mc map %s va %v size %d", &h, &va, &size); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			out = append(out, struct {
				va, size uint64
				devs     map[int]bool
			}{va, size, map[int]bool{}})
		case strings.HasPrefix(line, "mc access "):
			if _, err := fmt.Sscanf(line, "mc access %s va %v dev %d", &h, &va, &dev); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			for i := range out {
				if out[i].va == va {
					out[i].devs[dev] = true
				}
			}
		case strings.HasPrefix(line, "mc unmap "):
			if _, err := fmt.Sscanf(line, "mc unmap %s va %v size %d", &h, &va, &size); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			for i := range out {
				if out[i].va == va {
					out = append(out[:i], out[i+1:]...)
					break
				}
			}
		}
	}
	return out
}

// checkMulticastLog checks the life of every multicast object of the
// fake's log: created for some devices with a size of whole granules,
// each of those devices added once, bound once at offset 0 for the whole
// size from an allocation of whole granules, mapped with that size and
// access for one member device, unmapped, unbound and released with
// nothing mapped or bound. any says whether objects were expected.
func checkMulticastLog(t *testing.T, log string, any bool) {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	type object struct {
		devices, size, gran                   uint64
		added, bound, unbound                 map[int]int
		maps, unmaps, released, releasedClean int
		accessVA                              map[uint64]int
	}
	// A freed object's address may come back for a later one: objects
	// are keyed by address and generation.
	objs := map[string]*object{}
	gen := map[string]int{}
	var order []string
	get := func(h string) *object {
		o, ok := objs[fmt.Sprintf("%s#%d", h, gen[h])]
		if !ok {
			t.Fatalf("log: multicast object %s used before it was created", h)
		}
		return o
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "mc" {
			t.Fatalf("log line %q", line)
		}
		h := f[2]
		var dev int
		var a, b2, c, d uint64
		var va uint64
		switch f[1] {
		case "create":
			o := &object{added: map[int]int{}, bound: map[int]int{}, unbound: map[int]int{}, accessVA: map[uint64]int{}}
			if _, err := fmt.Sscanf(line, "mc create %s devices %d size %d granularity %d", &h, &o.devices, &o.size, &o.gran); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			gen[h]++
			key := fmt.Sprintf("%s#%d", h, gen[h])
			objs[key] = o
			order = append(order, key)
		case "add":
			fmt.Sscanf(line, "mc add %s dev %d", &h, &dev)
			get(h).added[dev]++
		case "bind":
			fmt.Sscanf(line, "mc bind %s dev %d mcoff %d memoff %d size %d memsize %d", &h, &dev, &a, &b2, &c, &d)
			o := get(h)
			o.bound[dev]++
			if a != 0 || b2 != 0 || c != o.size || d < c || d%o.gran != 0 {
				t.Errorf("%s: bound at mc offset %d, memory offset %d, %d bytes of %d; want offsets 0 and %d bytes of whole %d-byte granules",
					h, a, b2, c, d, o.size, o.gran)
			}
		case "map":
			fmt.Sscanf(line, "mc map %s va %v size %d", &h, &va, &c)
			o := get(h)
			o.maps++
			if c != o.size {
				t.Errorf("%s: mapped %d bytes, the object has %d", h, c, o.size)
			}
		case "access":
			fmt.Sscanf(line, "mc access %s va %v dev %d", &h, &va, &dev)
			get(h).accessVA[va]++
		case "unmap":
			get(h).unmaps++
		case "unbind":
			fmt.Sscanf(line, "mc unbind %s dev %d", &h, &dev)
			get(h).unbound[dev]++
		case "release":
			var mapped, bound int
			fmt.Sscanf(line, "mc release %s mapped %d bound %d", &h, &mapped, &bound)
			o := get(h)
			o.released++
			if mapped == 0 && bound == 0 {
				o.releasedClean++
			}
		}
	}
	if any != (len(objs) > 0) {
		t.Fatalf("%d multicast objects created, want some: %v", len(objs), any)
	}
	for _, h := range order {
		o := objs[h]
		if o.size == 0 || o.size%o.gran != 0 {
			t.Errorf("%s: size %d is not whole %d-byte granules", h, o.size, o.gran)
		}
		for what, m := range map[string]map[int]int{"added": o.added, "bound": o.bound, "unbound": o.unbound} {
			if uint64(len(m)) != o.devices {
				t.Errorf("%s: %d devices %s, want %d", h, len(m), what, o.devices)
			}
			for dev, k := range m {
				if k != 1 {
					t.Errorf("%s: device %d %s %d times", h, dev, what, k)
				}
			}
		}
		if uint64(o.maps) != o.devices || o.unmaps != o.maps || uint64(len(o.accessVA)) != o.devices {
			t.Errorf("%s: %d maps, %d unmaps, %d mappings given access; want %d each", h, o.maps, o.unmaps, len(o.accessVA), o.devices)
		}
		if o.released != 1 || o.releasedClean != 1 {
			t.Errorf("%s: released %d times (%d with nothing mapped or bound), want once", h, o.released, o.releasedClean)
		}
	}
	t.Logf("%d multicast objects created, bound, mapped and freed", len(objs))
}
