package gpu

// varsize.go holds the GPU backend's part of variable-size (alltoallv)
// plans: the operand terms uploaded once per session (one mg_vterm per
// region, in the encoder's order), and the per-call table (mg_vtable: the
// scratch chunk size and every rank's counts and displacements) that
// Launch writes into a fixed device buffer before each launch. The kernel
// resolves every region and pipeline from them in its prologue
// (csrc/mscclgo/varsize.cuh), so the op records, regions, launch
// arguments and their addresses are the same for every call.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mscclgo/mscclgo/executor"
)

// mgVTerm mirrors mg_vterm.
type mgVTerm struct {
	Index, Size, TBGID, TBGN uint32
	Owner, Counterpart       int32
	Buf                      uint8
	Pad                      [7]uint8
}

// mgVTable mirrors mg_vtable (the head of the per-call table).
type mgVTable struct {
	ChunkBytes             uint64
	NRanks, Per, Elem, Pad uint32
}

// Record sizes of the variable-size records.
const (
	sizeVTerm  = 32
	sizeVTable = 24
)

// varSession is the variable-size state of a session.
type varSession struct {
	vp    *executor.VarPlan
	terms DevPtr // mg_vterm[len(tables.regions)]
	table DevPtr // mg_vtable and 4 n×n arrays
	img   []byte // the host image of the table, rewritten per call
	// stage is pinned host memory the table is copied from, on the
	// kernel's stream before the launch.
	stage HostMem
	// scratch is the scratch size the session allocated: a call whose
	// Bind grew it needs a new session.
	scratch uint64
}

// varTerms encodes the term of every region of tabs, in buildTables'
// order (rank, thread block, op, pipeline body; sources, destinations).
// A scratch operand's counterpart becomes a region index in its block.
func varTerms(inst *executor.Instance, tabs *tables) ([]mgVTerm, error) {
	vp := inst.Var
	byRegion := make(map[*executor.Region]executor.VarTerm)
	for _, t := range vp.Terms() {
		byRegion[t.Region] = t
	}
	out := make([]mgVTerm, 0, len(tabs.regions))
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		for i := range ri.TBs {
			tb := &ri.TBs[i]
			first := len(out)
			at := make(map[*executor.Region]int)
			var cps []*executor.Region // counterpart of each region of the block, or nil
			add := func(op *executor.OpInstance) error {
				for _, regs := range [][]executor.Region{op.Src, op.Dst} {
					for k := range regs {
						reg := &regs[k]
						t, ok := byRegion[reg]
						if !ok {
							return fmt.Errorf("gpu: rank %d tb %d %s %s: operand without a variable-size term", r, tb.ID, op.Path, op.Type)
						}
						if t.Index > math.MaxUint32 || t.Size > math.MaxUint32 || t.TBGN > math.MaxUint32 {
							return fmt.Errorf("gpu: rank %d tb %d %s %s: chunks [%d, +%d) or group of %d beyond 32 bits", r, tb.ID, op.Path, op.Type, t.Index, t.Size, t.TBGN)
						}
						at[reg] = len(out) - first
						cps = append(cps, t.Counterpart)
						out = append(out, mgVTerm{Index: uint32(t.Index), Size: uint32(t.Size), TBGID: uint32(t.TBGID),
							TBGN: uint32(t.TBGN), Owner: int32(t.Owner), Counterpart: -1, Buf: uint8(t.Buffer)})
					}
				}
				return nil
			}
			for j := range tb.Ops {
				op := &tb.Ops[j]
				if err := add(op); err != nil {
					return nil, err
				}
				for k := range op.Body {
					if err := add(&op.Body[k]); err != nil {
						return nil, err
					}
				}
			}
			for k, cp := range cps {
				if cp == nil {
					continue
				}
				idx, ok := at[cp]
				if !ok {
					return nil, fmt.Errorf("gpu: rank %d tb %d: a scratch operand takes its size from an operand of another thread block", r, tb.ID)
				}
				out[first+k].Counterpart = int32(idx)
			}
		}
	}
	if len(out) != len(tabs.regions) {
		return nil, fmt.Errorf("gpu: %d variable-size terms for %d encoded regions", len(out), len(tabs.regions))
	}
	return out, nil
}

// openVar checks that inst is bound and uploads its terms and the
// per-call table's buffer.
func (s *session) openVar() error {
	inst := s.inst
	vp := inst.Var
	if vp == nil {
		return fmt.Errorf("%s: plan %q is an alltoallv plan but the instance comes from no executor.VarPlan: bind it with NewVarPlan and Bind", s.name, inst.Plan.Name)
	}
	if _, _, ok := vp.Bound(); !ok {
		return fmt.Errorf("%s: plan %q: the alltoallv instance is not bound to counts yet (VarPlan.Bind)", s.name, inst.Plan.Name)
	}
	if _, elem, _ := vp.Bound(); elem != s.opts.DType.Size() {
		return fmt.Errorf("%s: the instance is bound for %d-byte elements, the session runs %s", s.name, elem, s.opts.DType.Name())
	}
	terms, err := varTerms(inst, s.tabs)
	if err != nil {
		return err
	}
	v := &varSession{vp: vp, scratch: inst.ScratchBytes}
	if v.terms, err = s.upload(encode(terms)); err != nil {
		return err
	}
	n := uint64(len(inst.Ranks))
	v.img = make([]byte, sizeVTable+4*8*n*n)
	if v.table, err = s.alloc(uint64(len(v.img))); err != nil {
		return err
	}
	if v.stage, err = s.d.AllocHost(uint64(len(v.img))); err != nil {
		return fmt.Errorf("%s: allocating %d bytes of host-mapped memory for the alltoallv table: %w", s.name, len(v.img), err)
	}
	s.v = v
	return nil
}

// prepareVar checks one call against the session (the counts of the
// last Bind against the caller's buffers and the scratch allocated, the
// operands' alignment) and enqueues the call's table on the kernel's
// stream.
func (s *session) prepareVar(bufs []executor.RankBuffers) error {
	v, inst := s.v, s.inst
	c, elem, _ := v.vp.Bound()
	if inst.ScratchBytes > v.scratch {
		return fmt.Errorf("%s: these counts need %d bytes of scratch per rank, the session has %d: open a new session after a Bind that grows the scratch", s.name, inst.ScratchBytes, v.scratch)
	}
	if elem != s.opts.DType.Size() {
		return fmt.Errorf("%s: the instance is bound for %d-byte elements, the session runs %s", s.name, elem, s.opts.DType.Name())
	}
	n := len(inst.Ranks)
	for r, b := range bufs {
		if s.mp != nil {
			// A rank session: its own buffers alone (prepareVarRank).
			r = s.mp.rank
		}
		in, out := c.Extents(r)
		if uint64(len(b.Input)) < uint64(in)*uint64(elem) || uint64(len(b.Output)) < uint64(out)*uint64(elem) {
			return fmt.Errorf("%s: rank %d: input of %d and output of %d bytes, the counts address %d and %d", s.name, r,
				len(b.Input), len(b.Output), uint64(in)*uint64(elem), uint64(out)*uint64(elem))
		}
	}
	if err := checkAlignment(inst, s.packet, uint64(elem)); err != nil {
		return err
	}
	head := encode(mgVTable{ChunkBytes: inst.ChunkBytes, NRanks: uint32(n), Per: uint32(inst.Plan.AllToAllV.ChunksPerBlock), Elem: uint32(elem)})
	b := append(v.img[:0], head...)
	for _, m := range [][][]int64{c.Send, c.SendDispls, c.Recv, c.RecvDispls} {
		for r := range n {
			for p := range n {
				b = binary.LittleEndian.AppendUint64(b, uint64(m[r][p]))
			}
		}
	}
	// Staged and copied on the kernel's stream, before the launch: the
	// previous launch has ended, so the staging is free.
	for i := 0; i+8 <= len(b); i += 8 {
		v.stage.Store(uint64(i), binary.LittleEndian.Uint64(b[i:]))
	}
	if err := s.d.Enqueue(v.table, v.stage, 0, uint64(len(b))); err != nil {
		return fmt.Errorf("%s: writing the alltoallv table: %w", s.name, err)
	}
	return nil
}

// prepareVarRank is prepareVar for a rank session (one process per
// rank, rank.go): its own buffers are checked against its own extents,
// and the table, the same on every rank (every rank bound the same
// counts), goes to its device. Its proxy learns each put's size and
// offsets from the kernel's FIFO entries, which the kernel takes from
// the regions it resolved from the table, and the peer applies them as
// they come: no size travels beside the data.
func (s *session) prepareVarRank(own executor.RankBuffers) error {
	return s.prepareVar([]executor.RankBuffers{own})
}

// varArgs returns the mg_args fields of variable-size plans (0, 0 for
// the others).
func (s *session) varArgs() (terms, table uint64) {
	if s.v == nil {
		return 0, 0
	}
	return uint64(s.v.terms), uint64(s.v.table)
}
