package gpu

// prepare.go holds what every session kind does with an instance before
// it opens anything, once: executor.Prepare (validation, packet and
// scratch geometry, each rank's scratch slot and switch members), the
// kernel's code of the data type, the operands' alignment on the device
// and the encoder of the tables of layout.go's records (buildTables): one
// block record per thread block, the flat op list (pipeline bodies after
// their pipeline record), regions and channel/semaphore ids. A local
// session's rank sessions share their session's preparation.

import (
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// prepared is an instance made ready for the device: executor's
// preparation, the data type's code in the kernel and the static tables
// of every rank (a rank session keeps a copy of its own rank's blocks:
// forRank).
type prepared struct {
	*executor.Prepared
	dtype uint32
	tabs  *tables
}

// prepare is executor.Prepare of inst with opts, then the device's own
// preparation (prepareFrom); errors carry the backend's name.
func prepare(name string, inst *executor.Instance, opts executor.Options) (*prepared, error) {
	// The kernel's data types first: a nil DType is named as the
	// device's refusal.
	if _, err := dtypeCode(opts.DType); err != nil {
		return nil, err
	}
	p, err := executor.Prepare(inst, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: open: %w", name, err)
	}
	return prepareFrom(name, p)
}

// prepareFrom is the device's preparation of p: the data type's code
// (dtypeCode), the operands' alignment (checkAlignment) and the tables
// (buildTables).
func prepareFrom(name string, p *executor.Prepared) (*prepared, error) {
	if p == nil {
		return nil, fmt.Errorf("%s: open: no prepared instance", name)
	}
	dt, err := dtypeCode(p.Opts.DType)
	if err != nil {
		return nil, err
	}
	if err := checkAlignment(p.Inst, p.Packet, uint64(p.Opts.DType.Size())); err != nil {
		return nil, err
	}
	tabs, err := buildTables(p.Inst)
	if err != nil {
		return nil, err
	}
	return &prepared{Prepared: p, dtype: dt, tabs: tabs}, nil
}

func dtypeCode(dt executor.DType) (uint32, error) {
	if dt == nil {
		return 0, errors.New("gpu: open: Options.DType is nil")
	}
	switch dt.Name() {
	case executor.Float16.Name():
		return 0, nil
	case executor.BFloat16.Name():
		return 1, nil
	case executor.Float32.Name():
		return 2, nil
	case executor.Int32.Name():
		return 3, nil
	}
	return 0, fmt.Errorf("gpu: data type %s is not supported by the kernel", dt.Name())
}

// checkAlignment refuses operands the device would access misaligned
// (the host build and the CPU backend do not care): LL16 packets are
// 16-byte vector accesses at twice the data offset, LL8 packets 8-byte
// ones; packet payloads are read and written as 32-bit words; reductions
// access whole elements. The scratch half of double buffering is a packet
// base too.
func checkAlignment(inst *executor.Instance, packet uint64, elem uint64) error {
	if inst.Plan != nil && inst.Plan.UseDoubleScratch && (inst.ScratchBytes/2)%packet != 0 {
		return fmt.Errorf("gpu: the double-buffer half of scratch (%d bytes) is not a multiple of the %d-byte packets",
			inst.ScratchBytes/2, packet)
	}
	for r := range inst.Ranks {
		for _, tb := range inst.Ranks[r].TBs {
			for i := range tb.Ops {
				op := &tb.Ops[i]
				for _, o := range append([]executor.OpInstance{*op}, op.Body...) {
					if err := alignedOperands(&o, packet, elem); err != nil {
						return fmt.Errorf("gpu: rank %d tb %d %s %s: %w", r, tb.ID, o.Path, o.Type, err)
					}
				}
			}
		}
	}
	return nil
}

func alignedOperands(op *executor.OpInstance, packet, elem uint64) error {
	pkt := func(what string, i int, r executor.Region) error {
		if (2*r.Offset)%packet != 0 {
			return fmt.Errorf("%s %d: packets at %d are not %d-byte aligned", what, i, 2*r.Offset, packet)
		}
		return nil
	}
	word := func(what string, i int, r executor.Region, a uint64) error {
		if r.Offset%a != 0 {
			return fmt.Errorf("%s %d: offset %d is not a multiple of %d bytes", what, i, r.Offset, a)
		}
		return nil
	}
	var err error
	check := func(e error) {
		if err == nil {
			err = e
		}
	}
	switch t := op.Type; {
	case t == plan.OpCopyPacket:
		check(word("source", 0, op.Src[0], 4))
		check(pkt("destination", 0, op.Dst[0]))
	case t == plan.OpUnpackPacket:
		check(pkt("source", 0, op.Src[0]))
		check(word("destination", 0, op.Dst[0], 4))
	case t == plan.OpPutPacket:
		for i := range op.Dst {
			if op.ChannelType == plan.Port {
				check(pkt("source", i, op.Src[i]))
			} else {
				check(word("source", i, op.Src[i], 4))
			}
			check(pkt("destination", i, op.Dst[i]))
		}
	case t == plan.OpReadPutPacket, t == plan.OpMultiStorePacket:
		check(pkt("source", 0, op.Src[0]))
		for i := range op.Dst {
			check(pkt("destination", i, op.Dst[i]))
		}
	case t.Family() == plan.FamReduce && t.Packet(): // the reduce family, with packets
		check(word("source", 0, op.Src[0], 4))
		for i := 1; i < len(op.Src); i++ {
			check(pkt("source", i, op.Src[i]))
		}
		check(word("destination", 0, op.Dst[0], 4))
		for i := 1; i < len(op.Dst); i++ {
			check(pkt("destination", i, op.Dst[i]))
		}
	case t.ReducesElements(): // reductions of elements
		for i, r := range op.Src {
			check(word("source", i, r, elem))
		}
		for i, r := range op.Dst {
			check(word("destination", i, r, elem))
		}
	}
	return err
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
