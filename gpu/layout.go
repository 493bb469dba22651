package gpu

// layout.go holds the Go mirror of csrc/mscclgo/layout.h (field for
// field; gpu/emu's layout test checks sizes and offsets against the C
// compiler's) and the tables of those records the kernel reads; the
// encoder that fills them from an executor.Instance (buildTables) is the
// device's preparation, in prepare.go.

import (
	"bytes"
	"encoding/binary"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Constants of layout.h.
const (
	fifoDepth      = 512
	trigData       = 1
	trigFlag       = 2
	trigSync       = 4
	trigPackets    = 8
	maxSwitchRanks = 32
	numBarriers    = plan.MaxBarrierID + 1
)

// Block states and wait kinds of mg_progress.
const (
	stIdle = iota
	stRunning
	stWaiting
	stDone
	stAborted
)

const (
	waitNone = iota
	waitChannel
	waitPacket
	waitBarrier
	waitSem
	waitProxy
	waitFIFO
)

type mgRegion struct {
	Offset, Size uint64
	Rank         int32
	Buf, Kind    uint8
	Sw           uint16
}

type mgOp struct {
	Type, ChanType, NSrc, NDst, NIDs, BarrierID uint8
	Pad0                                        uint16
	FirstRegion, FirstID, NThreadBlocks         uint32
	Iterations, NBody, Pad1                     uint32
	UnitSize                                    uint64
}

type mgBlock struct {
	Rank, TB                                            int32
	FirstOp, NOps, FirstRegion, NRegions, FirstID, NIDs uint32
}

type mgSwitch struct {
	Members, MC   uint64
	NMembers, Buf uint32
}

type mgBarrier struct{ Count, Gen uint32 }

type mgTrigger struct{ W [4]uint64 }

type mgFifo struct {
	Tail  uint64
	Pad   [3]uint64
	Slots [fifoDepth]mgTrigger
}

type mgRank struct {
	Buf                              [3]uint64
	MemInbound, MemExpected, MemPeer uint64
	PortInbound, PortExpected        uint64
	Sems, Barriers, Switches         uint64
	Fifo, FifoHead, ReuseSlot        uint64
	FifoTail                         uint64
	NMem, NPort, NSwitch, NSems      uint32
}

type mgProgress struct {
	Op                           uint32
	Iter                         int32
	State, Beat                  uint32
	WaitKind, WaitA, WaitCt, Pad uint32
	WaitExpect, WaitGot, WaitAt  uint64
}

type mgControl struct {
	Abort, Ended uint32
	Pad          [14]uint32
}

type mgArgs struct {
	Blocks, Ops, Regions, IDs, Ranks, Progress, Control, ScratchOffset uint64
	NBlocks, NRanks, Flag, DType, Packet, Shmem                        uint32
	VTerms, VTable                                                     uint64
	Epoch, ScratchHalf                                                 uint64
	// RedOp is the session's executor.ReduceOp (MG_SUM...).
	RedOp, Pad uint32
}

type mgShared struct {
	Blk               mgBlock
	Ops, Regions, IDs uint64
	Dead, Flag        uint32
}

// Record sizes in bytes (the layout test checks them against binary.Size
// of the mirrors and the C compiler's sizeof).
const (
	sizeRegion   = 24
	sizeOp       = 40
	sizeBlock    = 32
	sizeSwitch   = 24
	sizeBarrier  = 8
	sizeFifo     = 32 + fifoDepth*32
	sizeRank     = 136
	sizeProgress = 56
	sizeControl  = 64
	sizeArgs     = 128
	sizeShared   = 64
)

// encode appends the little-endian image of records (all fixed-size).
func encode(records ...any) []byte {
	var b bytes.Buffer
	for _, r := range records {
		// binary.Write of fixed-size values into a bytes.Buffer cannot fail.
		_ = binary.Write(&b, binary.LittleEndian, r)
	}
	return b.Bytes()
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// tables are the static device tables of an instance.
type tables struct {
	blocks  []mgBlock
	ops     []mgOp
	regions []mgRegion
	ids     []uint32
	// refs[b][i] is the executor op of flat op i of block b (reports).
	refs [][]*executor.OpInstance
	// shmem is the dynamic shared memory every block gets: the largest
	// block's record, ops, regions and ids.
	shmem uint64
}
