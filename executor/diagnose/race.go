package diagnose

// race.go: the causes of a race report (executor.RaceError): for each
// racing pair of accesses, an access before the wait that would have
// ordered it (AccessBeforeWait), a buffer reused in the next launch with
// no handshake (ReuseAcrossLaunch), or two ops with nothing between them
// (Unordered), each naming the .star lines of both ops.

import (
	"fmt"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
)

// Races returns the causes of the racing pairs rs, merged (pairs of the
// same two .star lines, buffer and boundary are one cause) and ranked.
func Races(inst *executor.Instance, rs []executor.Race) []Cause {
	cs := make([]Cause, len(rs))
	for i, r := range rs {
		cs[i] = Race(inst, r)
	}
	return RankInPlanOrder(cs)
}

// Race is the candidate cause of one racing pair, counting one pair.
// The evidence ranks AccessBeforeWait first (0), then ReuseAcrossLaunch
// (1), then Unordered (2). inst may be nil: then no wait is looked for.
func Race(inst *executor.Instance, r executor.Race) Cause {
	a, b := r.A, r.B
	ka, kb := srcKey(a), srcKey(b)
	if ka > kb {
		ka, kb = kb, ka
	}
	key := fmt.Sprintf("%s|%s|%d|%v", ka, kb, a.Region.Buffer, a.Launch != b.Launch)
	if a.Launch != b.Launch {
		return reuseCause(r, key)
	}
	for _, p := range [][2]executor.Access{{a, b}, {b, a}} {
		local, peer := p[0], p[1]
		if wait, ok := lateWait(inst, local, peer.Rank); ok {
			return Cause{Kind: AccessBeforeWait, Op: accessRef(local), Other: wait, Place: local.Region, Peer: peer.Rank,
				Count: 1, Key: key + "|late", Text: fmt.Sprintf(
					"%s %s %s before its guarding wait, the wait at %s, which comes after it: nothing orders it after %s, which %s it (move the wait before the %s)",
					AccessName(local), accessVerb(local), PlaceText(local.Region), waitLine(wait), AccessName(peer), accessVerb(peer), local.Instr.Type)}
		}
	}
	return Cause{Kind: Unordered, Op: accessRef(a), Other: accessRef(b), Place: a.Region, Peer: b.Rank,
		Evidence: 2, Count: 1, Key: key, Text: fmt.Sprintf(
			"%s %s %s and %s %s it, and no signal and wait, semaphore or barrier orders the two",
			AccessName(a), accessVerb(a), PlaceText(a.Region), AccessName(b), accessVerb(b))}
}

// reuseCause is the cause of a pair across the launch boundary: the
// later access touches what the earlier op, or its proxy's transfer that
// nothing waited for, may still use.
func reuseCause(r executor.Race, key string) Cause {
	early, late := r.A, r.B
	if early.Launch > late.Launch {
		early, late = late, early
	}
	verb := strings.TrimSuffix(accessVerb(late), "s")
	who, fix := fmt.Sprintf("rank %d", early.Rank), fmt.Sprintf("a handshake: a signal after the last use, a wait before the next launch's %s", verb)
	if early.Proxy {
		who = fmt.Sprintf("rank %d's proxy", early.Rank)
		fix = fmt.Sprintf("flush the transfer (put_with_signal_and_flush, or a flush after it), or a handshake after the peer's wait, a wait before the next launch's %s", verb)
	}
	told := fmt.Sprintf("nothing tells rank %d that %s is done with it", late.Rank, who)
	if early.Proxy && early.Rank == late.Rank {
		told = fmt.Sprintf("nothing waits for rank %d's proxy to be done with it", early.Rank)
	}
	return Cause{Kind: ReuseAcrossLaunch, Op: accessRef(late), Other: accessRef(early), Place: late.Region, Peer: early.Rank,
		Evidence: 1, Count: 1, Key: key, Text: fmt.Sprintf(
			"%s %s %s in launch %d while %s may still %s it in launch %d: %s (%s; docs/executor.md §5.3)",
			AccessName(late), accessVerb(late), PlaceText(late.Region), late.Launch, AccessName(early), strings.TrimSuffix(accessVerb(early), "s"), early.Launch,
			told, fix)}
}

// PlaceText is "rank 1 scratch[0:4096]".
func PlaceText(r executor.Region) string {
	return fmt.Sprintf("rank %d %s[%d:%d]", r.Rank, r.Buffer.Name(), r.Offset, r.Offset+r.Size)
}

// AccessName is "the put at x.star:12:20 (rank 0 tb 0)": of a fused op,
// the line of the part that made the access (the sending part for a
// remote access, the reading part for a local one).
func AccessName(a executor.Access) string {
	if line := accessLine(a); line != "" {
		return fmt.Sprintf("the %s at %s (rank %d tb %d)", a.Instr.Type, line, a.Rank, a.TB)
	}
	return fmt.Sprintf("%s (rank %d tb %d)", a.Op, a.Rank, a.TB)
}

// accessLine is the .star line of the part of a's op that made the
// access, or "".
func accessLine(a executor.Access) string {
	if a.Instr == nil || len(a.Instr.Source) == 0 {
		return ""
	}
	src := a.Instr.Source
	if a.Proxy || a.Region.Rank != a.Rank {
		return src[len(src)-1]
	}
	return src[0]
}

func accessRef(a executor.Access) OpRef { return OpRef{Rank: a.Rank, TB: a.TB, Op: a.Instr} }

func accessVerb(a executor.Access) string {
	if a.Write {
		return "writes"
	}
	return "reads"
}

// srcKey identifies an access's op for grouping: the .star line of the
// part that made it, or its position.
func srcKey(a executor.Access) string {
	if line := accessLine(a); line != "" {
		return fmt.Sprint(line, a.Write)
	}
	return fmt.Sprintf("%d/%d/%s/%v", a.Rank, a.TB, a.Op, a.Write)
}

// lateWait is the first wait after the op of access a in its thread
// block (an access to its rank's own buffer, which the peer accessed
// remotely) on a channel from rank peer: the wait that, placed before
// the op, would most likely have ordered the peer's access before it (a
// heuristic: the report names the two ops' lines in any case).
func lateWait(inst *executor.Instance, a executor.Access, peer int) (OpRef, bool) {
	if inst == nil || a.Instr == nil || a.Proxy || peer == a.Rank || a.Region.Rank != a.Rank || a.Rank < 0 || a.Rank >= len(inst.Ranks) {
		return OpRef{}, false
	}
	return nextWait(inst, a.Rank, a.TB, a.Instr, peer)
}

// waitLine is the wait's .star lines, or its place in the plan.
func waitLine(w OpRef) string {
	if len(w.Op.Source) > 0 {
		return strings.Join(w.Op.Source, ", ")
	}
	return w.Op.Path
}
