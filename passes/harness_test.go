package passes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// example is one reference program of the passes, recorded with the builder
// of builder_test.go and run through the whole pipeline (the document's
// outputs are those of JSON(), i.e. of every pass). want maps
//
//	"R/T"     to the ops of rank R, thread block T (ir.SprintOps form);
//	"R/T hdr" to the header line of that block (id and tables);
//	"R tbs"   to the number of thread blocks of rank R;
//	"gpu R"   to the rank-level lines of ir.Sprint for rank R.
//
// The expected texts add to the document's JSON the fields the plan does
// not print (data_sync bits, memory-channel ids, put channel ids).
type example struct {
	name    string
	opts    []option
	build   func(t *tprog)
	want    map[string]string
	err     error  // expected sentinel, if the pipeline must fail
	errText string // expected error text (exact)
	// fuseTwice, when set, says why fusing the fused list again changes
	// it; otherwise the test asserts Fuse(Fuse(x)) == Fuse(x).
	fuseTwice string
}

func runExamples(t *testing.T, rows []example) {
	t.Helper()
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			tp := newProg(row.opts...)
			row.build(tp)
			p := tp.p
			if err := ir.Check(p); err != nil {
				t.Fatalf("recorded IR fails the checker: %v", err)
			}
			err := Run(p, Config{Check: true})
			if row.err != nil {
				tp2 := newProg(row.opts...)
				row.build(tp2)
				if err2 := Run(tp2.p, Config{}); err2 == nil || err2.Error() != err.Error() {
					t.Errorf("rank-major Run error %v differs from pass-major %v", err2, err)
				}
				if !errors.Is(err, row.err) {
					t.Fatalf("Run error = %v, want %v", err, row.err)
				}
				if row.errText != "" && err.Error() != row.errText {
					t.Errorf("error text:\n got %s\nwant %s", err, row.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			compareWant(t, p, row.want)
			if p.InstrFusion {
				checkFuseTwice(t, row)
			}
			checkRankMajor(t, row, p)
			checkAppender(t, row, p)
		})
	}
}

func compareWant(t *testing.T, p *ir.Program, want map[string]string) {
	t.Helper()
	for key, w := range want {
		var got string
		var rank, tbID int
		switch {
		case strings.HasPrefix(key, "gpu "):
			rank, _ = strconv.Atoi(strings.TrimPrefix(key, "gpu "))
			got = gpuSummary(p, rank)
		case strings.HasSuffix(key, " tbs"):
			rank, _ = strconv.Atoi(strings.TrimSuffix(key, " tbs"))
			got = strconv.Itoa(len(p.GPUs[rank].ThreadBlocks))
			w += "\n"
			got += "\n"
		default:
			hdr := strings.HasSuffix(key, " hdr")
			if _, err := fmt.Sscanf(strings.TrimSuffix(key, " hdr"), "%d/%d", &rank, &tbID); err != nil {
				t.Fatalf("bad want key %q", key)
			}
			tbs := p.GPUs[rank].ThreadBlocks
			if tbID >= len(tbs) {
				t.Errorf("%s: rank %d has %d thread blocks", key, rank, len(tbs))
				continue
			}
			if hdr {
				got = lines(ir.SprintThreadBlock(tbs[tbID]))[0] + "\n"
				w += "\n"
			} else {
				got = ir.SprintOps(tbs[tbID].Ops)
				w = dedent(w)
			}
		}
		if key == "gpu "+strconv.Itoa(rank) {
			w = dedent(w)
		}
		if diff := cmp.Diff(lines(w), lines(got)); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", key, diff)
		}
	}
}

// gpuSummary returns the rank-level lines of ir.Sprint for one rank.
func gpuSummary(p *ir.Program, rank int) string {
	var b strings.Builder
	in := false
	for _, l := range lines(ir.Sprint(p)) {
		switch {
		case strings.HasPrefix(l, "gpu "):
			in = l == "gpu "+strconv.Itoa(rank) || strings.HasPrefix(l, "gpu "+strconv.Itoa(rank)+" ")
		case strings.HasPrefix(l, "  tb ") || strings.HasPrefix(l, "    "):
			continue
		}
		if in {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// checkRankMajor runs the example again with the plain Config (rank-major
// driver, no checks) and compares the result with the pass-major run.
func checkRankMajor(t *testing.T, row example, passMajor *ir.Program) {
	t.Helper()
	tp := newProg(row.opts...)
	row.build(tp)
	if err := Run(tp.p, Config{}); err != nil {
		t.Fatalf("rank-major Run: %v", err)
	}
	if diff := cmp.Diff(lines(ir.Sprint(passMajor)), lines(ir.Sprint(tp.p))); diff != "" {
		t.Errorf("rank-major and pass-major runs differ (-pass-major +rank-major):\n%s", diff)
	}
}

// checkFuseTwice records the example again and checks that fusing every
// thread block's fused list again changes nothing (the buildtools
// fix-twice check), unless the row documents why it does.
func checkFuseTwice(t *testing.T, row example) {
	t.Helper()
	tp := newProg(row.opts...)
	row.build(tp)
	changed := false
	for r, g := range tp.p.GPUs {
		for _, tb := range g.ThreadBlocks {
			once := Fuse(tb.Ops)
			onceText := ir.SprintOps(once)
			twiceText := ir.SprintOps(Fuse(once))
			if onceText == twiceText {
				continue
			}
			changed = true
			if row.fuseTwice == "" {
				t.Errorf("rank %d tb %d: fusing twice differs from once (-once +twice):\n%s",
					r, tb.ID, cmp.Diff(lines(onceText), lines(twiceText)))
			}
		}
	}
	if row.fuseTwice != "" && !changed {
		t.Errorf("fuseTwice says %q, but fusing twice equals fusing once", row.fuseTwice)
	}
}

// checkAppender records the example again, fuses every thread block with
// an Appender as starlib does while recording, and checks that the
// compiled program equals the one fused by the pass. It does so twice:
// with Append, and with ExtendSync or else AppendCopy on ops built in
// storage that is overwritten after each call (as starlib's ir.OpBuf is),
// which the fused list must never refer to.
func checkAppender(t *testing.T, row example, want *ir.Program) {
	t.Helper()
	for _, borrowed := range []bool{false, true} {
		tp := newProg(row.opts...)
		row.build(tp)
		if tp.p.InstrFusion {
			for _, g := range tp.p.GPUs {
				for _, tb := range g.ThreadBlocks {
					var a Appender
					var ops []*ir.Op
					for _, op := range tb.Ops {
						if !borrowed || op.Kind == plan.OpPipeline || op.Kind == plan.OpBarrier {
							ops = a.Append(ops, op)
							continue
						}
						switch op.Kind {
						case plan.OpSignal, plan.OpRelaxedSignal, plan.OpWait, plan.OpRelaxedWait, plan.OpFlush:
							if op.IDSet.Len() == 1 && a.ExtendSync(ops, op.Kind, op.IDSet.First(), op.ChannelType, op.DataSync, op.Pos) {
								continue
							}
						}
						buf := op.Clone()
						ops = a.AppendCopy(ops, buf)
						poison(buf)
					}
					a.Finish(ops)
					tb.Ops = ops
				}
			}
			tp.p.Fused = true
		}
		if err := Run(tp.p, Config{Check: true}); err != nil {
			t.Fatalf("Run after Appender (borrowed %v): %v", borrowed, err)
		}
		if diff := cmp.Diff(lines(ir.Sprint(want)), lines(ir.Sprint(tp.p))); diff != "" {
			t.Errorf("Appender (borrowed %v) and Fuse differ (-fuse +appender):\n%s", borrowed, diff)
		}
	}
}

// poison overwrites an op's lists and id set in place.
func poison(op *ir.Op) {
	for _, refs := range [][]ir.Ref{op.Src, op.Dst, op.LocalSrc, op.LocalDst, op.LocalPktDst, op.RemoteSrc, op.RemoteDst} {
		for i := range refs {
			refs[i] = ir.Ref{Index: -99, Size: -99}
		}
	}
	for _, ids := range [][]int{op.ChannelIDs, op.PutChannelIDs, op.SemaphoreIDs, op.SrcIndex, op.DstIndex} {
		for i := range ids {
			ids[i] = 99
		}
	}
	if op.IDSet != nil {
		*op.IDSet = *ir.NewSet(99)
	}
	op.DataSync = ir.SyncBoth
}
