//go:build cuda

package cuda

// launch_test.go launches the interpreter through cu on device tables
// built by hand from csrc/mscclgo/layout.h (the runtime's own encoder in
// package gpu is not exported): a block without ops, and two blocks that
// each copy half of a rank's input to its output.

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/gpu"
)

// The records of layout.h the tests fill in, field for field.
type (
	tBlock struct {
		Rank, TB                                            int32
		FirstOp, NOps, FirstRegion, NRegions, FirstID, NIDs uint32
	}
	tOp struct {
		Type, ChanType, NSrc, NDst, NIDs, BarrierID uint8
		Pad0                                        uint16
		FirstRegion, FirstID, NThreadBlocks         uint32
		Iterations, NBody, Pad1                     uint32
		UnitSize                                    uint64
	}
	tRegion struct {
		Offset, Size uint64
		Rank         int32
		Buf, Kind    uint8
		Sw           uint16
	}
	tRank struct {
		Buf                         [3]uint64
		Ptrs                        [12]uint64 // counters, semaphores, barriers, switches, FIFO: unused here
		NMem, NPort, NSwitch, NSems uint32
	}
	tArgs struct {
		Blocks, Ops, Regions, IDs, Ranks, Progress, Control, ScratchOffset uint64
		NBlocks, NRanks, Flag, DType, Packet, Shmem                        uint32
	}
	tProgress struct {
		Op                           uint32
		Iter                         int32
		State, Beat                  uint32
		WaitKind, WaitA, WaitCt, Pad uint32
		WaitExpect, WaitGot, WaitAt  uint64
	}
)

// Constants of layout.h.
const (
	mgCopy        = 9 // MG_COPY
	mgInput       = 0
	mgOutput      = 1
	mgDone        = 3 // MG_DONE
	mgF32         = 2
	sizeShared    = 64 // mg_shared
	sizeControl   = 64 // mg_control
	sizeProgress  = 56 // mg_progress
	mgLocalRegion = 0
)

func encode(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// upload copies b into new device memory, freed when the test ends.
func upload(t *testing.T, d *driver, b []byte) gpu.DevPtr {
	t.Helper()
	p, err := d.Alloc(uint64(max(len(b), 8)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Free(p) })
	if err := d.HtoD(p, b); err != nil {
		t.Fatal(err)
	}
	return p
}

// tiny is a hand-built launch: its tables on the device and its
// host-mapped control and progress records.
type tiny struct {
	host  gpu.HostMem
	args  gpu.DevPtr
	grid  int
	shmem int
}

// place uploads the tables of one rank whose buffers are in and out.
func place(t *testing.T, d *driver, blocks []tBlock, ops []tOp, regions []tRegion, in, out gpu.DevPtr) tiny {
	t.Helper()
	h, err := d.AllocHost(sizeControl + sizeProgress*uint64(len(blocks)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Free() })
	shmem := 0
	for _, b := range blocks {
		shmem = max(shmem, sizeShared+int(b.NOps)*40+int(b.NRegions)*24)
	}
	rank := tRank{Buf: [3]uint64{uint64(in), uint64(out), 0}}
	args := tArgs{
		Blocks: uint64(upload(t, d, encode(t, blocks))), Ops: uint64(upload(t, d, encode(t, ops))),
		Regions: uint64(upload(t, d, encode(t, regions))), IDs: uint64(upload(t, d, nil)),
		Ranks: uint64(upload(t, d, encode(t, []tRank{rank}))), Progress: uint64(h.Dev()) + sizeControl,
		Control: uint64(h.Dev()), NBlocks: uint32(len(blocks)), NRanks: 1, Flag: 1, DType: mgF32, Packet: 16,
		Shmem: uint32(shmem),
	}
	return tiny{host: h, args: upload(t, d, encode(t, args)), grid: len(blocks), shmem: shmem}
}

// progress reads the progress record of block b.
func (k tiny) progress(b int) tProgress {
	at := sizeControl + uint64(b)*sizeProgress
	w := func(i uint64) uint64 { return k.host.Load(at + 8*i) }
	return tProgress{
		Op: uint32(w(0)), Iter: int32(w(0) >> 32), State: uint32(w(1)), Beat: uint32(w(1) >> 32),
		WaitKind: uint32(w(2)), WaitA: uint32(w(2) >> 32), WaitCt: uint32(w(3)), Pad: uint32(w(3) >> 32),
		WaitExpect: w(4), WaitGot: w(5), WaitAt: w(6),
	}
}

func TestLaunchEmptyBlock(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	k := place(t, d, []tBlock{{}}, nil, nil, 0, 0)
	if err := d.Launch(k.grid, testThreads(), k.shmem, k.args); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if err := d.Launch(k.grid, testThreads(), k.shmem, k.args); err == nil {
		t.Error("a second Launch before Wait succeeded")
	}
	if err := d.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if diff := cmp.Diff(tProgress{State: mgDone}, k.progress(0)); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if err := d.Launch(0, testThreads(), k.shmem, k.args); err == nil {
		t.Error("a launch of no blocks succeeded")
	}
}

func TestLaunchCopy(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	const n, half = 8192, 4096
	in := pattern(n, 0x5a)
	inDev := upload(t, d, in)
	outDev := upload(t, d, make([]byte, n))
	// Two blocks, one copy op each: block b copies half b.
	blocks := []tBlock{
		{Rank: 0, TB: 0, FirstOp: 0, NOps: 1, FirstRegion: 0, NRegions: 2},
		{Rank: 0, TB: 1, FirstOp: 1, NOps: 1, FirstRegion: 2, NRegions: 2},
	}
	ops := []tOp{
		{Type: mgCopy, NSrc: 1, NDst: 1},
		{Type: mgCopy, NSrc: 1, NDst: 1},
	}
	var regions []tRegion
	for b := range uint64(2) {
		regions = append(regions,
			tRegion{Offset: b * half, Size: half, Buf: mgInput, Kind: mgLocalRegion},
			tRegion{Offset: b * half, Size: half, Buf: mgOutput, Kind: mgLocalRegion})
	}
	k := place(t, d, blocks, ops, regions, inDev, outDev)
	for launch := range 3 {
		if err := d.Launch(k.grid, testThreads(), k.shmem, k.args); err != nil {
			t.Fatalf("launch %d: %v", launch, err)
		}
		if err := d.Wait(); err != nil {
			t.Fatalf("launch %d: Wait: %v", launch, err)
		}
	}
	got := make([]byte, n)
	if err := d.DtoH(got, outDev); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(in, got); i >= 0 {
		t.Errorf("output byte %d is %#x, want %#x", i, got[i], in[i])
	}
	for b := range k.grid {
		p := k.progress(b)
		if p.State != mgDone || p.Op != 1 || p.Iter != -1 || p.Beat < 3 {
			t.Errorf("block %d: progress %+v, want done after op 1 (iteration -1, a beat of at least one per launch)", b, p)
		}
	}
}
