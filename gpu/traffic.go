package gpu

import (
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
)

// TrafficCount is one op's data traffic in one block of a launch, as a
// driver that counts it reports it (gpu/emu's CountTraffic): the data
// bytes the op's threads loaded and stored, the bytes of LL packets they
// loaded again while polling, and their warp-wide accesses (requests)
// with the 32-byte sectors those touched against the fewest sectors that
// could hold the bytes they moved.
type TrafficCount struct {
	Loaded, Stored, Polled        uint64
	Requests, Sectors, MinSectors uint64
}

// Moved is the data bytes the op moved: loaded and stored, polls not
// counted.
func (c TrafficCount) Moved() uint64 { return c.Loaded + c.Stored }

// Efficiency is the op's sector efficiency: MinSectors / Sectors, 1 for
// an op that moved nothing.
func (c TrafficCount) Efficiency() float64 {
	if c.Sectors == 0 {
		return 1
	}
	return float64(c.MinSectors) / float64(c.Sectors)
}

// Add adds o to c.
func (c *TrafficCount) Add(o TrafficCount) {
	c.Loaded += o.Loaded
	c.Stored += o.Stored
	c.Polled += o.Polled
	c.Requests += o.Requests
	c.Sectors += o.Sectors
	c.MinSectors += o.MinSectors
}

// OpTraffic is an op of the plan with its traffic in one launch and what
// the plan requires it to move.
type OpTraffic struct {
	Rank, TB int
	Op       *executor.OpInstance
	// Required is the data bytes the plan has the op move in one launch:
	// every operand's bytes (an LL packet operand's twice: flags ride with
	// the data; a switch operand's once per member, where the kernel reads
	// or writes each member's buffer), over every pipeline iteration.
	Required uint64
	TrafficCount
}

// PlaceTraffic puts the per-block, per-op counts of a launch of inst
// (the grid's blocks in the order of the launch's tables: rank by rank,
// thread block by thread block; each block's ops with pipeline bodies
// flattened, as the kernel runs them) on inst's ops, with what each is
// required to move.
func PlaceTraffic(inst *executor.Instance, counts [][]TrafficCount) ([]OpTraffic, error) {
	var out []OpTraffic
	blk := 0
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		for t := range ri.TBs {
			tb := &ri.TBs[t]
			if blk >= len(counts) {
				return nil, fmt.Errorf("gpu: traffic of %d blocks, the plan has more", len(counts))
			}
			k := 0
			place := func(op *executor.OpInstance, iters int, unit uint64) {
				ot := OpTraffic{Rank: r, TB: tb.ID, Op: op, Required: requiredBytes(ri, op, iters, unit)}
				if k < len(counts[blk]) {
					ot.TrafficCount = counts[blk][k]
				}
				out = append(out, ot)
				k++
			}
			for j := range tb.Ops {
				op := &tb.Ops[j]
				place(op, 1, 0)
				for b := range op.Body {
					place(&op.Body[b], op.Iterations, op.UnitSize)
				}
			}
			if len(counts[blk]) > k {
				return nil, fmt.Errorf("gpu: block %d (rank %d tb %d) counted %d ops, the plan has %d", blk, r, tb.ID,
					len(counts[blk]), k)
			}
			blk++
		}
	}
	if blk != len(counts) {
		return nil, fmt.Errorf("gpu: traffic of %d blocks, the plan has %d", len(counts), blk)
	}
	return out, nil
}

// requiredBytes is what op requires moving in iters iterations of unit
// bytes (unit 0: outside a pipeline), on rank ri.
func requiredBytes(ri *executor.RankInstance, op *executor.OpInstance, iters int, unit uint64) uint64 {
	pkt := op.Type.Packet()
	var sum uint64
	side := func(regs []executor.Region, isPkt func(int) bool) {
		for i, reg := range regs {
			var b uint64
			for it := range iters {
				b += clampedBytes(reg.Size, uint64(it)*unit, unit, pkt)
			}
			if isPkt(i) {
				b *= 2
			}
			if reg.Switch >= 0 && reg.Switch < len(ri.Switches) {
				b *= uint64(len(ri.Switches[reg.Switch].Ranks))
			}
			sum += b
		}
	}
	side(op.Src, op.Type.SrcPacket)
	side(op.Dst, op.Type.DstPacket)
	return sum
}

// clampedBytes is the bytes of a size-byte operand that an iteration at
// offset o with unit u moves (u 0, or a packet op, which ignores
// pipeline offsets: all of them).
func clampedBytes(size, o, u uint64, pkt bool) uint64 {
	if u == 0 || pkt {
		return size
	}
	if size <= o {
		return 0
	}
	return min(size-o, u)
}
