//go:build cuda

package cuda

// driver_test.go holds the driver-level tests: kernel image choice,
// opening and closing, memory and copies, host-mapped memory atomics,
// occupancy, and launches of the interpreter on hand-built device tables
// (an empty block, and one copy op). Without a GPU they run against the
// fake libcuda of testdata/fakecuda (`make gpu-test`): a cuda-tagged test
// binary cannot start without some libcuda.so.1, since cu's init exits
// the process when cuInit fails.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/gpu"
)

// fake reports whether the tests run on the fake driver (its kernel
// library is named in the environment).
func fake() bool { return os.Getenv("MSCCLGO_FAKE_KERNEL_LIB") != "" }

// testThreads is the block size of test launches: every CUDA thread of
// the fake driver is a host thread.
func testThreads() int {
	if fake() {
		return 4
	}
	return 128
}

// testNode is the Node every test opens its devices from, so that tests
// running in parallel share each device's launch admission, as the
// sessions of one process must.
var testNode = NewNode()

// openDriver opens device 0 and closes it when the test ends.
func openDriver(t *testing.T) *driver {
	t.Helper()
	g, err := testNode.Open(0)
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return g.(*driver)
}

func TestImagesFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		major int
		want  []string
	}{
		{"volta", 7, nil},
		{"ampere", 8, []string{imageSM80}},
		{"hopper", 9, []string{imageSM90, imagePTX}},
		{"blackwell", 10, []string{imagePTX}},
		{"consumer-blackwell", 12, []string{imagePTX}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, imagesFor(tc.major)); diff != "" {
				t.Errorf("imagesFor(%d) (-want +got):\n%s", tc.major, diff)
			}
		})
	}
}

// TestKernelImagesEmbedded checks that the binary carries every image
// `make gpu` builds.
func TestKernelImagesEmbedded(t *testing.T) {
	t.Parallel()
	for _, name := range []string{imageSM80, imageSM90, imagePTX} {
		data, err := fs.ReadFile(kernelFS, path.Join("kernels", name))
		if err != nil {
			t.Errorf("%s: %v (run `make gpu` before the cuda-tagged tests)", name, err)
			continue
		}
		if name == imagePTX {
			if !bytes.Contains(data, []byte(".entry "+kernelName)) {
				t.Errorf("%s has no entry %s", name, kernelName)
			}
		} else if !bytes.HasPrefix(data, []byte("\x7fELF")) {
			t.Errorf("%s is not an ELF cubin", name)
		}
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	info := d.Info()
	if fake() {
		want := gpu.DeviceInfo{Name: "fake CUDA device (host threads)", SMs: 132, MaxThreadsPerBlock: 1024,
			MaxSharedPerBlock: 232448}
		if diff := cmp.Diff(want, info); diff != "" {
			t.Errorf("Info (-want +got):\n%s", diff)
		}
		if d.image != imageSM90 {
			t.Errorf("the fake device (9.0) loaded %s, want %s", d.image, imageSM90)
		}
	}
	if info.Name == "" || info.SMs <= 0 || info.MaxThreadsPerBlock < 1024 || info.MaxSharedPerBlock < 48<<10 {
		t.Errorf("implausible device: %+v", info)
	}
	t.Logf("%+v, image %s", info, d.image)
}

func TestOpenBadDevice(t *testing.T) {
	t.Parallel()
	for _, dev := range []int{-1, 1 << 20} {
		if g, err := Open(dev); err == nil {
			_ = g.Close()
			t.Errorf("Open(%d) succeeded", dev)
		}
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	g, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := g.Alloc(64); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: got %v, want ErrClosed", err)
	}
	if err := g.Launch(1, 1, 0, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Launch after Close: got %v, want ErrClosed", err)
	}
}

// pattern returns n bytes of a recognisable pattern.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func TestAllocCopyRoundTrip(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	for _, n := range []int{1, 8, 255, 4096, 1<<20 + 3} {
		p, err := d.Alloc(uint64(n))
		if err != nil {
			t.Fatalf("Alloc(%d): %v", n, err)
		}
		if p%256 != 0 {
			t.Errorf("Alloc(%d) = %#x, not 256-byte aligned", n, uint64(p))
		}
		got := pattern(n, 0xff)
		if err := d.DtoH(got, p); err != nil {
			t.Fatalf("DtoH: %v", err)
		}
		if i := firstDiff(make([]byte, n), got); i >= 0 {
			t.Errorf("Alloc(%d): byte %d is %#x, not zeroed", n, i, got[i])
		}
		want := pattern(n, byte(n))
		if err := d.HtoD(p, want); err != nil {
			t.Fatalf("HtoD: %v", err)
		}
		got = make([]byte, n)
		if err := d.DtoH(got, p); err != nil {
			t.Fatalf("DtoH: %v", err)
		}
		if i := firstDiff(want, got); i >= 0 {
			t.Errorf("%d bytes: byte %d came back as %#x, want %#x", n, i, got[i], want[i])
		}
		if err := d.Free(p); err != nil {
			t.Errorf("Free: %v", err)
		}
	}
	if _, err := d.Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
}

func TestCopyAndFence(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	const n = 1 << 12
	src, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	h, err := d.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free()
	want := pattern(n, 3)
	if err := d.HtoD(src, want); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		dst, src  gpu.DevPtr
		n         uint64
		packets   bool
		checkHost bool
	}{
		{name: "data, odd size", dst: dst, src: src, n: 1001},
		{name: "packets", dst: dst + 1024, src: src + 1024, n: 512, packets: true},
		{name: "into host-mapped memory", dst: h.Dev(), src: src, n: n, packets: true, checkHost: true},
		{name: "from host-mapped memory", dst: dst + 2048, src: h.Dev() + 2048, n: 2048},
	} {
		if err := d.Copy(tc.dst, tc.src, tc.n, tc.packets); err != nil {
			t.Fatalf("%s: Copy: %v", tc.name, err)
		}
		if err := d.Fence(); err != nil {
			t.Fatalf("%s: Fence: %v", tc.name, err)
		}
		off := uint64(tc.src - src)
		if tc.src == h.Dev()+2048 {
			off = 2048
		}
		exp := want[off : off+tc.n]
		got := make([]byte, tc.n)
		if tc.checkHost {
			for w := uint64(0); w < tc.n; w += 8 {
				binary.LittleEndian.PutUint64(got[w:], h.Load(w))
			}
		} else if err := d.DtoH(got, tc.dst); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(exp, got); i >= 0 {
			t.Errorf("%s: byte %d is %#x, want %#x", tc.name, i, got[i], exp[i])
		}
	}
	if err := d.Copy(dst+4, src, 16, true); err == nil {
		t.Error("a packet copy to an unaligned address succeeded")
	}
}

func TestHostMemAtomics(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	h, err := d.AllocHost(100)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 104 || h.Dev() == 0 {
		t.Errorf("AllocHost(100): Len %d, Dev %#x; want 104 and an address", h.Len(), uint64(h.Dev()))
	}
	for off := uint64(0); off < h.Len(); off += 8 {
		if v := h.Load(off); v != 0 {
			t.Errorf("word %d is %#x, not zeroed", off/8, v)
		}
	}
	h.Store(8, 41)
	if v := h.Add(8, 1); v != 42 {
		t.Errorf("Add returned %d, want 42", v)
	}
	const workers, adds = 8, 1000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range adds {
				h.Add(16, 1)
			}
		})
	}
	wg.Wait()
	got := []uint64{h.Load(0), h.Load(8), h.Load(16), h.Load(24)}
	if diff := cmp.Diff([]uint64{0, 42, workers * adds, 0}, got); diff != "" {
		t.Errorf("words (-want +got):\n%s", diff)
	}
	// The device's view: a copy to the device address is seen by Load.
	if err := d.HtoD(h.Dev()+24, binary.LittleEndian.AppendUint64(nil, 0xfeed)); err != nil {
		t.Fatal(err)
	}
	if v := h.Load(24); v != 0xfeed {
		t.Errorf("after HtoD to the mapped address: %#x, want 0xfeed", v)
	}
	if err := h.Free(); err != nil {
		t.Errorf("Free: %v", err)
	}
	if err := h.Free(); err == nil {
		t.Error("a second Free succeeded")
	}
}

func TestOccupancy(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	info := d.Info()
	for _, tc := range []struct {
		name          string
		block, shmem  int
		wantErr       bool
		wantFake      int // blocks on the fake device (132 SMs, 2048 threads, 32 blocks per SM)
		wantAtLeastSM int // blocks per SM on any device
	}{
		{name: "1024 threads", block: 1024, wantFake: 264, wantAtLeastSM: 1},
		{name: "4 threads", block: 4, wantFake: 32 * 132, wantAtLeastSM: 1},
		{name: "100 KB shared", block: 128, shmem: 100_000, wantFake: 2 * 132, wantAtLeastSM: 1},
		{name: "no threads", block: 0, wantErr: true},
		{name: "too many threads", block: 2048, wantErr: true},
		{name: "too much shared", block: 32, shmem: info.MaxSharedPerBlock + 1, wantErr: true},
	} {
		n, err := d.Occupancy(tc.block, tc.shmem)
		switch {
		case tc.wantErr:
			if err == nil {
				t.Errorf("%s: Occupancy(%d, %d) = %d, want an error", tc.name, tc.block, tc.shmem, n)
			}
		case err != nil:
			t.Errorf("%s: Occupancy(%d, %d): %v", tc.name, tc.block, tc.shmem, err)
		case fake() && n != tc.wantFake:
			t.Errorf("%s: Occupancy(%d, %d) = %d, want %d", tc.name, tc.block, tc.shmem, n, tc.wantFake)
		case n < tc.wantAtLeastSM*info.SMs:
			t.Errorf("%s: Occupancy(%d, %d) = %d, want at least %d", tc.name, tc.block, tc.shmem, n, info.SMs)
		}
	}
}
