package executor

// Contribution is an input element: rank Rank's input byte Offset.
type Contribution struct {
	Rank   int
	Offset uint64
}

// Contributions returns the input elements whose values make up rank's
// output element at byte off (docs/semantics.md §5.3): every rank's element at the same
// offset of the whole vector for allreduce and reducescatter, one rank's
// element for allgather and alltoall. It returns nil for sendrecv (any
// rank of the sending group holds the value) and for collectives without
// a defined result.
func (l *BufferLayout) Contributions(rank int, off uint64) []Contribution {
	in, out := l.Sizes.Input, l.Sizes.Output
	if rank < 0 || rank >= l.NRanks || off >= out {
		return nil
	}
	n := uint64(l.NRanks)
	var cs []Contribution
	switch l.c {
	case AllReduce, ReduceScatter:
		at := off
		if l.c == ReduceScatter {
			at += uint64(rank) * out
		}
		for r := range l.NRanks {
			cs = append(cs, Contribution{Rank: r, Offset: at})
		}
	case AllGather:
		cs = append(cs, Contribution{Rank: int(off / in), Offset: off % in})
	case AllToAll:
		m := in / n
		cs = append(cs, Contribution{Rank: int(off / m), Offset: uint64(rank)*m + off%m})
	}
	return cs
}
