package cli

// race.go prints run --race's report: the most likely cause first (a
// read or write before the wait that would have ordered it, a buffer
// reused in the next launch with no handshake, or two ops with nothing
// between them), naming the .star lines of both ops, then the pairs, at
// most maxReportLines lines unless --explain.

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// raceLaunches is the number of checked launches per size of run: iters,
// but with race detection at least two launches in all (warm-up ones
// included), the fewest that show a race across the launch boundary
// (docs/executor.md §5.3).
func raceLaunches(race bool, warmup, iters int) int {
	if race && warmup+iters < 2 {
		return 2 - warmup
	}
	return iters
}

// reportRace prints err (a launch's race report) after prefix, with the
// most likely cause first.
func reportRace(w io.Writer, prefix string, inst *executor.Instance, err error, all bool) {
	limit := maxReportLines
	if all {
		limit = 0
	}
	var re *executor.RaceError
	if !errors.As(err, &re) || len(re.Races) == 0 {
		limitLines(w, prefix+err.Error()+"\n", limit)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%srace: %d conflicting access pair(s)", prefix, len(re.Races))
	if n := re.AcrossLaunches(); n > 0 {
		fmt.Fprintf(&b, ", %d across the launch boundary", n)
	}
	b.WriteString("\n")
	var cs []*cause
	byKey := map[string]*cause{}
	for _, r := range re.Races {
		c := raceCause(inst, r)
		k := byKey[c.key]
		if k == nil {
			k = c
			byKey[c.key] = k
			cs = append(cs, k)
		}
		k.n++
	}
	slices.SortStableFunc(cs, func(a, b *cause) int {
		switch wa, wb := a.weight(), b.weight(); {
		case wa > wb:
			return -1
		case wa < wb:
			return 1
		}
		return 0
	})
	printCauses(&b, cs, uint64(len(re.Races)), "pairs")
	for _, r := range re.Races {
		across := r.A.Launch != r.B.Launch
		fmt.Fprintf(&b, "  %s\n    vs %s\n", accessText(r.A, across), accessText(r.B, across))
	}
	limitLines(w, b.String(), limit)
}

// accessText is one access of a race pair, as the CPU backend describes
// it, with the buffer's full name.
func accessText(a executor.Access, launch bool) string {
	kind := "read"
	if a.Write {
		kind = "write"
	}
	s := fmt.Sprintf("rank %d tb %d %s %s of %s", a.Rank, a.TB, a.Op, kind, regionText(a.Region))
	if launch {
		s += fmt.Sprintf(" in launch %d", a.Launch)
	}
	return s
}

// regionText is "rank 1 scratch[0:4096]".
func regionText(r executor.Region) string {
	return fmt.Sprintf("rank %d %s[%d:%d]", r.Rank, r.Buffer.Name(), r.Offset, r.Offset+r.Size)
}

// raceOp is "the put at x.star:12:20 (rank 0 tb 0)": of a fused op, the
// line of the part that made the access (the sending part for a remote
// access, the reading part for a local one).
func raceOp(a executor.Access) string {
	if line := raceLine(a); line != "" {
		return fmt.Sprintf("the %s at %s (rank %d tb %d)", a.Instr.Type, line, a.Rank, a.TB)
	}
	return fmt.Sprintf("%s (rank %d tb %d)", a.Op, a.Rank, a.TB)
}

// raceLine is the .star line of the part of a's op that made the access,
// or "".
func raceLine(a executor.Access) string {
	if a.Instr == nil || len(a.Instr.Source) == 0 {
		return ""
	}
	src := a.Instr.Source
	if a.Proxy || a.Region.Rank != a.Rank {
		return src[len(src)-1]
	}
	return src[0]
}

func accessVerb(a executor.Access) string {
	if a.Write {
		return "writes"
	}
	return "reads"
}

// raceCause is the candidate cause of one race pair. Ranked: 0 an access
// before the wait of its thread block that would have ordered it after
// the other (a wait too late), 1 a buffer reused in the next launch, 2
// two ops that nothing orders.
func raceCause(inst *executor.Instance, r executor.Race) *cause {
	a, b := r.A, r.B
	ka, kb := srcKey(a), srcKey(b)
	if ka > kb {
		ka, kb = kb, ka
	}
	key := fmt.Sprintf("%s|%s|%d|%v", ka, kb, a.Region.Buffer, a.Launch != b.Launch)
	if a.Launch == b.Launch {
		for _, p := range [][2]executor.Access{{a, b}, {b, a}} {
			local, peer := p[0], p[1]
			if wait := lateWait(inst, local, peer.Rank); wait != nil {
				return &cause{key: key + "|late", rank: 0, text: fmt.Sprintf(
					"%s %s %s before its guarding wait, the wait at %s, which comes after it: nothing orders it after %s, which %s it (move the wait before the %s)",
					raceOp(local), accessVerb(local), regionText(local.Region), waitLine(wait), raceOp(peer), accessVerb(peer), local.Instr.Type)}
			}
		}
		return &cause{key: key, rank: 2, text: fmt.Sprintf(
			"%s %s %s and %s %s it, and no signal and wait, semaphore or barrier orders the two",
			raceOp(a), accessVerb(a), regionText(a.Region), raceOp(b), accessVerb(b))}
	}
	early, late := a, b
	if early.Launch > late.Launch {
		early, late = late, early
	}
	verb := strings.TrimSuffix(accessVerb(late), "s")
	who, fix := fmt.Sprintf("rank %d", early.Rank), fmt.Sprintf("a handshake: a signal after the last use, a wait before the next launch's %s", verb)
	if early.Proxy {
		// A port transfer that the thread block never waited for.
		who = fmt.Sprintf("rank %d's proxy", early.Rank)
		fix = fmt.Sprintf("flush the transfer (put_with_signal_and_flush, or a flush after it), or a handshake after the peer's wait, a wait before the next launch's %s", verb)
	}
	told := fmt.Sprintf("nothing tells rank %d that %s is done with it", late.Rank, who)
	if early.Proxy && early.Rank == late.Rank {
		told = fmt.Sprintf("nothing waits for rank %d's proxy to be done with it", early.Rank)
	}
	return &cause{key: key, rank: 1, text: fmt.Sprintf(
		"%s %s %s in launch %d while %s may still %s it in launch %d: %s (%s; docs/executor.md §5.3)",
		raceOp(late), accessVerb(late), regionText(late.Region), late.Launch, raceOp(early), strings.TrimSuffix(accessVerb(early), "s"), early.Launch,
		told, fix)}
}

// srcKey identifies an access's op for grouping: the .star line of the
// part that made it, or its position.
func srcKey(a executor.Access) string {
	if line := raceLine(a); line != "" {
		return fmt.Sprint(line, a.Write)
	}
	return fmt.Sprintf("%d/%d/%s/%v", a.Rank, a.TB, a.Op, a.Write)
}

// lateWait returns the first wait after the op of access a in its thread
// block (a thread block's access to its rank's own buffer, which the peer
// accessed remotely) on a channel to
// rank peer: the wait that, placed before the op, would most likely have
// ordered the peer's access before it (a heuristic: the report names the
// two ops' lines in any case).
func lateWait(inst *executor.Instance, a executor.Access, peer int) *executor.OpInstance {
	if a.Proxy || peer == a.Rank || a.Region.Rank != a.Rank {
		return nil
	}
	return nextWait(inst, a.Rank, a.TB, a.Instr, peer)
}

// nextWait returns the first wait after op in thread block tb of rank
// on a channel to rank peer, when no signal, barrier or semaphore
// release lies between them, or nil.
func nextWait(inst *executor.Instance, rank, tb int, op0 *executor.OpInstance, peer int) *executor.OpInstance {
	if inst == nil || op0 == nil || rank < 0 || rank >= len(inst.Ranks) {
		return nil
	}
	ri := &inst.Ranks[rank]
	var ops []*executor.OpInstance
	for i := range ri.TBs {
		if ri.TBs[i].ID == tb {
			eachOp(ri.TBs[i].Ops, func(op *executor.OpInstance) { ops = append(ops, op) })
		}
	}
	at := slices.Index(ops, op0)
	if at < 0 {
		return nil
	}
	toPeer := func(op *executor.OpInstance) bool {
		chans := ri.MemoryChannels
		if op.ChannelType == plan.Port {
			chans = ri.PortChannels
		}
		for _, c := range op.Channels {
			if c >= 0 && c < len(chans) && chans[c].Peer == peer {
				return true
			}
		}
		return false
	}
	for _, op := range ops[at+1:] {
		switch op.Type {
		case plan.OpWait, plan.OpRelaxedWait:
			if toPeer(op) {
				return op
			}
		case plan.OpSignal, plan.OpRelaxedSignal, plan.OpPutWithSignal, plan.OpPutWithSignalAndFlush, plan.OpBarrier, plan.OpSemRelease:
			// A wait after the op's own signal guards the next step,
			// not this one.
			return nil
		}
	}
	return nil
}

// waitLine is the wait's .star line, or its position.
func waitLine(op *executor.OpInstance) string {
	if len(op.Source) > 0 {
		return strings.Join(op.Source, ", ")
	}
	return op.Path
}

// remoteWriters returns the ranks other than r with an op that writes
// into rank r's buffer buf at offset off (by the plan's operands).
func remoteWriters(inst *executor.Instance, r int, buf plan.BufferType, off uint64) []int {
	var ws []int
	for i := range inst.Ranks {
		ri := &inst.Ranks[i]
		if ri.Rank == r {
			continue
		}
		found := false
		for j := range ri.TBs {
			eachOp(ri.TBs[j].Ops, func(op *executor.OpInstance) {
				for _, d := range op.Dst {
					if d.Rank == r && d.Buffer == buf && d.Offset <= off && off < d.Offset+d.Size {
						found = true
					}
				}
			})
		}
		if found {
			ws = append(ws, ri.Rank)
		}
	}
	return ws
}
