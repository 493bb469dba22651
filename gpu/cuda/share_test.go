//go:build cuda

package cuda

// share_test.go tests how sessions share devices: the refusal of an IPC
// handle opened in the process that exported it, sessions launched from
// many goroutines on one device (the launch admission), rank sessions of
// one process on several devices with peer access on and off, and the
// devices' identities. On the fake driver the machine comes from the
// environment, so the tests that need a particular one run in a child
// process of the test binary (rerun).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// childEnv marks the child process of rerun.
const childEnv = "MSCCLGO_TEST_CHILD"

// rerun runs the calling test in a child process with env added when the
// tests run on the fake driver and this is not that child yet; it reports
// whether the caller should run the test itself (the child, or a real
// device, whose machine is what it is).
func rerun(t *testing.T, env ...string) bool {
	t.Helper()
	if !fake() || os.Getenv(childEnv) != "" {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var pattern []string
	for _, part := range strings.Split(t.Name(), "/") {
		pattern = append(pattern, "^"+part+"$")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+strings.Join(pattern, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name()), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a child process with %v: %v\n%s", t.Name(), env, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s did not pass in the child process with %v:\n%s", t.Name(), env, out)
	}
	t.Logf("passed in a child process with %v", env)
	return false
}

// TestIpcOwnProcess checks that opening a handle this process exported
// fails, as CUDA's cuIpcOpenMemHandle does (CUDA_ERROR_INVALID_CONTEXT):
// rank sessions in one process must use each other's addresses instead.
func TestIpcOwnProcess(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	p, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	h, err := d.IpcGet(p)
	if err != nil {
		t.Fatalf("IpcGet: %v", err)
	}
	q, err := d.IpcOpen(h)
	if err == nil {
		_ = d.IpcClose(q)
		t.Fatal("IpcOpen of a handle this process exported succeeded; CUDA refuses it")
	}
	if !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_CONTEXT") {
		t.Errorf("IpcOpen: %v, want CUDA_ERROR_INVALID_CONTEXT", err)
	}
}

// TestAllocID checks that an allocation's id is the same from any address
// in it and that a new allocation gets a new one, even at a freed one's
// address (devcomm.Comm registers it anew by it).
func TestAllocID(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	var ider gpu.AllocIDer = d
	p, err := d.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ider.AllocID(p)
	if err != nil {
		t.Fatalf("AllocID: %v", err)
	}
	if in, err := ider.AllocID(p + 4100); err != nil || in != id {
		t.Errorf("AllocID inside the allocation: %d, %v; want %d", in, err, id)
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	q, err := d.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(q)
	id2, err := ider.AllocID(q)
	if err != nil {
		t.Fatalf("AllocID: %v", err)
	}
	if id2 == id {
		t.Errorf("a new allocation (at %#x; the freed one was at %#x) has the freed one's id %d", uint64(q), uint64(p), id)
	}
}

// TestDeviceIDs checks that two drivers of one device name it alike and
// that devices differ (with two devices or more).
func TestDeviceIDs(t *testing.T) {
	if !rerun(t, "MSCCLGO_FAKECUDA_DEVICES=3") {
		return
	}
	n, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for o := range n {
		a, err := testNode.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := testNode.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		ida, idb := a.(gpu.Device).DeviceID(), b.(gpu.Device).DeviceID()
		if ida != idb || !strings.HasPrefix(ida, "GPU-") {
			t.Errorf("device %d: IDs %q and %q", o, ida, idb)
		}
		if a.(gpu.Device).Admission() != b.(gpu.Device).Admission() {
			t.Errorf("device %d: two drivers of one Node have different admissions", o)
		}
		if p, ok := seen[ida]; ok {
			t.Errorf("devices %d and %d have the same ID %s", p, o, ida)
		}
		seen[ida] = o
		_ = a.Close()
		_ = b.Close()
	}
}

// TestConcurrentSessions opens sessions of several plans from many
// goroutines at once on one device and launches each a few times: every
// result must equal the CPU backend's. On the fake driver the device has
// four multiprocessors (128 blocks of the test shape), so the launches
// do not all fit at once: without the admission the fake refuses the
// launch that would be queued behind spinning blocks (a hang on a GPU).
func TestConcurrentSessions(t *testing.T) {
	if !rerun(t, "MSCCLGO_FAKECUDA_SMS=4") {
		return
	}
	var plans []*plan.Plan
	for _, f := range []string{"single_node/allreduce.plan.json", "single_node/allgather_pkt.plan.json", "single_node/allgather.plan.json"} {
		p, err := executor.LoadFile(filepath.Join("../../tests/ports", f))
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	const goroutines = 12
	var wg sync.WaitGroup
	errs := make([]error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pl := plans[g%len(plans)]
			size := harness.CheckSizes(pl, executor.Float32, 1<<13, 1)
			if len(size) == 0 {
				errs[g] = fmt.Errorf("plan %s: no float32 size up to 8 KiB", pl.Name)
				return
			}
			c := gputest.Case{Plan: pl, Size: size[0], DType: executor.Float32, InPlace: pl.Inplace, Launches: 3,
				Timeout: 20 * time.Second}
			out, err := gputest.Run(context.Background(), backend(), c)
			if err == nil && out != gputest.Same {
				err = fmt.Errorf("outcome %v", out)
			}
			if err != nil {
				errs[g] = fmt.Errorf("goroutine %d, %s: %w", g, c, err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestRankSessionsDevices runs rank sessions of one process with rank r
// on device r mod 2: peers on the other device are reached through peer
// access, which the driver enables; with peer access off between the two
// devices, every rank is refused with the pair named.
func TestRankSessionsDevices(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		refuse string // "" : must run and match the CPU backend
	}{
		{name: "peer", env: []string{"MSCCLGO_FAKECUDA_DEVICES=2"}},
		{name: "nopeer", env: []string{"MSCCLGO_FAKECUDA_DEVICES=2", "MSCCLGO_FAKECUDA_NOPEER=0-1"},
			refuse: "cannot access the memory of device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !rerun(t, tc.env...) {
				return
			}
			if n, err := Devices(); err != nil || n < 2 {
				t.Skipf("needs two devices (%d, %v)", n, err)
			}
			if !fake() && tc.refuse != "" {
				t.Skip("peer access is what the machine has")
			}
			plan, err := executor.LoadFile("../../tests/ports/single_node/allreduce.plan.json")
			if err != nil {
				t.Fatal(err)
			}
			lay, err := harness.PlanLayout(plan, 1<<14, executor.Float32, plan.Inplace)
			if err != nil {
				t.Fatal(err)
			}
			c := gputest.RankCase{Plan: plan, Layout: lay, Opts: executor.Options{DType: executor.Float32},
				Launches: 2, Dir: t.TempDir()}
			for r := range plan.GPUs {
				c.Configs = append(c.Configs, gpu.Config{Name: "gpu", Threads: testThreads(),
					Open: func() (gpu.Driver, error) { return testNode.Open(r % 2) }})
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			got, errs := gputest.RunRanks(ctx, gpu.Config{}, c)
			if tc.refuse != "" {
				for r, err := range errs {
					if err == nil || !strings.Contains(err.Error(), tc.refuse) {
						t.Errorf("rank %d: %v, want an error with %q", r, err, tc.refuse)
					}
				}
				return
			}
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			want, err := gputest.SingleCPU(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			for r := range want {
				if diff := cmp.Diff(want[r], got[r]); diff != "" {
					t.Errorf("rank %d output differs from the CPU backend's (-want +got):\n%.2000s", r, diff)
				}
			}
		})
	}
}

// TestNVLSBranch checks the branch an NVLS plan's switch channels take
// with the multicast attribute off and on, and that the plan's bytes
// equal the CPU backend's either way.
func TestNVLSBranch(t *testing.T) {
	for _, tc := range []struct {
		name, env, want string
	}{
		{name: "nomulticast", env: "MSCCLGO_FAKECUDA_MULTICAST=0", want: "has no NVLS multicast"},
		{name: "multicast", env: "MSCCLGO_FAKECUDA_MULTICAST=1", want: "supports NVLS multicast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !rerun(t, tc.env) {
				return
			}
			plan, err := executor.LoadFile("../../tests/ports/single_node/allreduce_nvls_zero_copy.plan.json")
			if err != nil {
				t.Fatal(err)
			}
			lay, err := executor.PlanLayout(plan, 1<<13, executor.Float32, plan.Inplace)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := executor.Instantiate(plan, lay.Sizes)
			if err != nil {
				t.Fatal(err)
			}
			sess, err := backend().Open(inst, executor.Options{DType: executor.Float32})
			if err != nil {
				t.Fatal(err)
			}
			got := sess.(interface{ NVLS() string }).NVLS()
			_ = sess.Close()
			mc := false
			if d, err := testNode.Open(0); err == nil {
				mc = d.Info().Multicast
				_ = d.Close()
			}
			if (fake() && !strings.Contains(got, tc.want)) || (!fake() && mc != strings.Contains(got, "supports NVLS multicast")) {
				t.Errorf("NVLS branch %q, want one that says %q", got, tc.want)
			}
			c := gputest.Case{Plan: plan, Size: lay.Size, DType: executor.Float32, InPlace: plan.Inplace, Launches: 2, Timeout: 10 * time.Second}
			if out, err := gputest.Run(context.Background(), backend(), c); err != nil || out != gputest.Same {
				t.Errorf("%s: %v, %v; want the CPU backend's bytes", c, out, err)
			}
		})
	}
}
