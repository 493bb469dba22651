package gpu

// layout.go holds the Go mirror of csrc/mscclgo/layout.h (field for
// field; gpu/emu's layout test checks sizes and offsets against the C
// compiler's) and the encoder that turns an executor.Instance into the
// device tables the kernel reads: one block record per thread block, the
// flat op list (pipeline bodies after their pipeline record), regions and
// channel/semaphore ids.

import (
	"bytes"
	"encoding/binary"
	"fmt"

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

// buildTables encodes every thread block of inst, rank by rank.
func buildTables(inst *executor.Instance) (*tables, error) {
	t := &tables{}
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		for i := range ri.TBs {
			tb := &ri.TBs[i]
			blk := mgBlock{Rank: int32(r), TB: int32(tb.ID), FirstOp: uint32(len(t.ops)),
				FirstRegion: uint32(len(t.regions)), FirstID: uint32(len(t.ids))}
			var refs []*executor.OpInstance
			for j := range tb.Ops {
				op := &tb.Ops[j]
				if err := t.addOp(ri, op, blk); err != nil {
					return nil, fmt.Errorf("gpu: rank %d tb %d %s %s: %w", r, tb.ID, op.Path, op.Type, err)
				}
				refs = append(refs, op)
				for k := range op.Body {
					b := &op.Body[k]
					if b.Type == plan.OpPipeline {
						return nil, fmt.Errorf("gpu: rank %d tb %d %s: nested pipelines are not supported", r, tb.ID, b.Path)
					}
					if err := t.addOp(ri, b, blk); err != nil {
						return nil, fmt.Errorf("gpu: rank %d tb %d %s %s: %w", r, tb.ID, b.Path, b.Type, err)
					}
					refs = append(refs, b)
				}
			}
			blk.NOps = uint32(len(t.ops)) - blk.FirstOp
			blk.NRegions = uint32(len(t.regions)) - blk.FirstRegion
			blk.NIDs = uint32(len(t.ids)) - blk.FirstID
			sh := align8(sizeShared) + align8(uint64(blk.NOps)*sizeOp) +
				align8(uint64(blk.NRegions)*sizeRegion) + align8(uint64(blk.NIDs)*4)
			t.shmem = max(t.shmem, sh)
			t.blocks = append(t.blocks, blk)
			t.refs = append(t.refs, refs)
		}
	}
	return t, nil
}

// addOp appends one op record with block-relative region and id indices.
func (t *tables) addOp(ri *executor.RankInstance, op *executor.OpInstance, blk mgBlock) error {
	if len(op.Src) > plan.MaxOperandsPerSide || len(op.Dst) > plan.MaxOperandsPerSide {
		return fmt.Errorf("%d sources and %d destinations: the kernel takes at most %d on a side",
			len(op.Src), len(op.Dst), plan.MaxOperandsPerSide)
	}
	ids := op.Channels
	if op.Type == plan.OpSemAcquire || op.Type == plan.OpSemRelease {
		ids = op.Semaphores
	}
	if len(ids) > 255 {
		return fmt.Errorf("%d channel or semaphore ids: the kernel takes at most 255", len(ids))
	}
	rec := mgOp{
		Type: uint8(op.Type), ChanType: uint8(op.ChannelType),
		NSrc: uint8(len(op.Src)), NDst: uint8(len(op.Dst)), NIDs: uint8(len(ids)),
		BarrierID:   uint8(op.BarrierID),
		FirstRegion: uint32(len(t.regions)) - blk.FirstRegion,
		FirstID:     uint32(len(t.ids)) - blk.FirstID,
	}
	if op.Type == plan.OpBarrier {
		rec.NThreadBlocks = uint32(op.NumThreadBlocks)
	}
	if op.Type == plan.OpPipeline {
		if op.Iterations < 0 || uint64(op.Iterations) > 1<<31 {
			return fmt.Errorf("%d pipeline iterations", op.Iterations)
		}
		rec.Iterations, rec.NBody, rec.UnitSize = uint32(op.Iterations), uint32(len(op.Body)), op.UnitSize
	}
	for _, id := range ids {
		t.ids = append(t.ids, uint32(id))
	}
	for i, r := range op.Src {
		reg, err := region(ri, r, plan.SrcKind(op.Type, i))
		if err != nil {
			return fmt.Errorf("source %d: %w", i, err)
		}
		t.regions = append(t.regions, reg)
	}
	for i, r := range op.Dst {
		reg, err := region(ri, r, plan.DstKind(op.Type, i))
		if err != nil {
			return fmt.Errorf("destination %d: %w", i, err)
		}
		t.regions = append(t.regions, reg)
	}
	t.ops = append(t.ops, rec)
	return nil
}

func region(ri *executor.RankInstance, r executor.Region, kind plan.OperandKind) (mgRegion, error) {
	reg := mgRegion{Offset: r.Offset, Size: r.Size, Rank: int32(r.Rank), Buf: uint8(r.Buffer), Kind: uint8(kind)}
	switch kind {
	case plan.SwitchOperand:
		if r.Switch < 0 || r.Switch >= len(ri.Switches) {
			return reg, fmt.Errorf("switch channel %d out of range", r.Switch)
		}
		if n := len(ri.Switches[r.Switch].Ranks); n > maxSwitchRanks {
			return reg, fmt.Errorf("switch channel %d has %d members: the kernel takes at most %d", r.Switch, n, maxSwitchRanks)
		}
		reg.Rank, reg.Sw = -1, uint16(r.Switch)
	case plan.LocalOperand:
		reg.Rank = int32(ri.Rank)
	}
	return reg, nil
}
