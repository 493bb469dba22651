// Package fuzz holds FuzzEval, the fuzz target of .star evaluation: the
// fuzz input drives generators that write DSL programs (random ones, and
// templates of correct collectives), and every program goes through what
// `mscclgo eval`, `mscclgo check` and `mscclgo run --race` do with it,
// through the public APIs (starlib, executor, executor/cpu), checking at
// each step the properties listed on FuzzEval.
//
// `go test ./tests/fuzz` runs the seed corpus (and any crasher kept in
// testdata/fuzz/FuzzEval) as a normal test; `make fuzz` fuzzes it. Set
// MSCCLGO_FUZZ_PRINT=1 to have every input's script printed to standard
// error before it runs (to read what a corpus file or a crasher is:
// go test ./tests/fuzz -run 'FuzzEval/NAME').
package fuzz

// eval_fuzz_test.go holds the fuzz target, its seeds and the checks.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/emit"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	planfmt "github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// Bounds of one input. The fuzzing engine kills an input that runs for
// 10 s without a word; these keep every phase well inside that, so that
// a hang is reported here, with the script.
const (
	// maxSteps is the Starlark step limit of an evaluation: generated
	// programs need a few thousand steps, runaway loops hit it fast.
	maxSteps = 2_000_000
	// evalDeadline cancels an evaluation (through Options.Context).
	evalDeadline = time.Second
	// runDeadline cancels the launches of a run.
	runDeadline = 4 * time.Second
	// hangGrace is how long past its deadline a phase may take before it
	// is reported as hung.
	hangGrace = 500 * time.Millisecond
	// deadlockTimeout is the CPU backend's watchdog (no progress at all);
	// a deadlock of parked thread blocks is reported at once anyway.
	deadlockTimeout = time.Second
	// maxRunBytes skips runs of plans whose smallest valid message size
	// is larger (a large minimum message size or alignment).
	maxRunBytes = 1 << 18
	// maxRunTBs skips runs of plans with more thread blocks (over all
	// ranks): a goroutine each, with race detection.
	maxRunTBs = 512
	// iters is the number of launches of a run: the second shows state
	// left unbalanced by the first.
	iters = 2
	// slowInput is when an input's script is printed to standard error
	// while it still runs (for inputs the fuzzing engine kills).
	slowInput = 3 * time.Second
)

// Input modes, chosen by the first byte.
const (
	// rawScript marks an input whose remaining bytes are the script.
	rawScript = 0xff
	// templateEvery: a first byte b with b%templateEvery == 0 (and b not
	// rawScript) selects a template; others a random program.
	templateEvery = 3
)

// mainName is the name of the fuzzed script in its source.
const mainName = "fuzz.star"

// FuzzEval interprets the input as choices for a program generator (or,
// after a 0xff byte, as a script), evaluates the program and checks:
//
//   - evaluation returns (a Go panic escaping starlib, or an evaluation
//     that outlives its deadline, is a failure); its errors are
//     *starlib.Error values; compiling each program (Program.Plan) does
//     not panic and fails only with a *starlib.Error;
//   - the plan is a function of the script: a second evaluation, with the
//     plan streamed by WritePlan as `mscclgo eval` writes it, gives the
//     same bytes, and JSON() in the script (when it calls it) the same
//     text; the plan is valid JSON; its source map (eval --source-map)
//     attaches to the loaded plan;
//   - load and check agree: plan.Load fails exactly when
//     plan.Check (what `mscclgo check` prints) reports an error;
//   - eval and check agree: a program the generator wrote cleanly (no
//     deliberate mistake, no construct the docs say the loader refuses)
//     that eval compiles without a warning gives a plan check accepts,
//     executor limits aside;
//   - check and run agree: at the sizes CheckSizes finds, check --size's
//     launch checks (executor.CheckLaunch) and those every backend's
//     Open and launch make (executor.CheckBuffers) accept or reject the
//     plan alike, with 16- and 8-byte LL packets; at the smallest, the
//     plan opens on the CPU backend and every launch ends with no error
//     but a deadlock or a race report (a hung launch is a failure);
//   - runs are repeatable: a run free of races and deadlocks, repeated in
//     a fresh session with the other LL packet size, leaves the same
//     bytes (see comparable for the programs this cannot hold for), and
//     so does the run of the program compiled with instr_fusion flipped;
//   - a template (a program that computes its collective correctly) gives
//     a plan that check accepts (executor limits aside) without a
//     launch-boundary warning (executor.CheckReuse), and whose runs end
//     without deadlock, race or wrong element.
//
// Random programs are usually wrong algorithms: their deadlocks, races
// and wrong results are not failures.
func FuzzEval(f *testing.F) {
	for _, seed := range seedChoices() {
		f.Add(seed)
	}
	for _, s := range seedScripts(f) {
		f.Add(append([]byte{rawScript}, s...))
	}
	// The inputs and expected results of every run come from one Checker,
	// which generates them once for all inputs.
	checker := harness.NewChecker()
	f.Fuzz(func(t *testing.T, data []byte) {
		in := generate(data)
		in.checker = checker
		if os.Getenv("MSCCLGO_FUZZ_PRINT") != "" {
			fmt.Fprintf(os.Stderr, "=== %s input (%d bytes)\n%s", in.kind, len(data), in.text)
		}
		slow := time.AfterFunc(slowInput, func() {
			fmt.Fprintf(os.Stderr, "=== %s input still running after %v:\n%s", in.kind, slowInput, in.text)
		})
		defer slow.Stop()
		checkScript(t, in)
	})
}

// input is a generated (or given) script and what is known of it.
type input struct {
	kind    string // "random", "raw" or "template TEMPLATE"
	text    string
	correct bool // a template: it must run correctly
	// clean: the generator wrote nothing that check may rightly reject
	// (see randGen.dirty); templates are clean.
	clean bool
	// fusionSafe: fusion cannot change what the program computes (see
	// randGen.fusionUnsafe); only random programs are compared.
	fusionSafe bool
	defines    map[string]string // -D name=value
	dtype      executor.ElemType
	checker    *harness.Checker // fills inputs and checks results
}

// generate turns fuzz data into a script.
func generate(data []byte) input {
	if len(data) > 0 && data[0] == rawScript {
		return input{kind: "raw", text: string(data[1:]), dtype: executor.Float16}
	}
	c := &choices{data: data}
	if len(data) > 0 && data[0]%templateEvery == 0 {
		c.pos = 1
		tm := genTemplates(c)
		return input{kind: "template " + tm.kind, text: tm.text, correct: true, clean: true, dtype: tm.dtype}
	}
	p := genRandom(c)
	return input{kind: "random", text: p.text, clean: p.clean, fusionSafe: p.fusionSafe, defines: p.defines, dtype: executor.Float16}
}

// source serves the fuzzed script as mainName and every other file from
// the bundled algorithms' directory (so that a script may load
// lib/common.star).
type source struct{ main []byte }

func (s source) ReadFile(name string) ([]byte, error) {
	if name == mainName {
		return s.main, nil
	}
	return fs.ReadFile(os.DirFS(filepath.Join("..", "..", "algorithms")), name)
}

func (s source) Display(name string) string { return name }

// evalOutcome is what one evaluation gave.
type evalOutcome struct {
	res    *starlib.Result
	err    error
	stderr string
	plans  [][]byte // per program: the plan, or nil
	errs   []error  // per program: the compile error, or nil
}

// failf fails the test with the script.
func failf(t *testing.T, in input, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s\n--- %s script:\n%s--- end of script", fmt.Sprintf(format, args...), in.kind, in.text)
}

// guarded runs f in a goroutine and returns its panic (with the stack) as
// a string, or "hung" when it has not returned within limit.
func guarded(limit time.Duration, f func()) (problem string) {
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
				return
			}
			done <- ""
		}()
		f()
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case p := <-done:
		return p
	case <-timer.C:
		return "hung"
	}
}

// evaluate evaluates the script and compiles its programs; stream chooses
// WritePlan (as mscclgo eval writes) over Plan (as check and run read).
func evaluate(t *testing.T, in input, stream bool) *evalOutcome {
	t.Helper()
	out := &evalOutcome{}
	var stderr bytes.Buffer
	problem := guarded(evalDeadline+hangGrace, func() {
		ctx, cancel := context.WithTimeout(context.Background(), evalDeadline)
		defer cancel()
		opts := starlib.Options{Defines: in.defines, Stderr: &stderr, Context: ctx}
		opts.MaxSteps = maxSteps
		out.res, out.err = starlib.Eval(source{[]byte(in.text)}, mainName, opts)
	})
	switch {
	case problem == "hung":
		failf(t, in, "evaluation still running %v after its %v deadline", hangGrace, evalDeadline)
	case problem != "":
		failf(t, in, "evaluation: %s", problem)
	}
	out.stderr = stderr.String()
	if out.err != nil {
		var se *starlib.Error
		if !errors.As(out.err, &se) {
			failf(t, in, "evaluation error %T is not a *starlib.Error: %v", out.err, out.err)
		}
		return out
	}
	for _, p := range out.res.Programs {
		var plan []byte
		var err error
		problem := guarded(evalDeadline+hangGrace, func() {
			if stream {
				var b bytes.Buffer
				err = p.WritePlan(&b)
				plan = b.Bytes()
			} else {
				plan, err = p.Plan()
			}
		})
		switch {
		case problem == "hung":
			failf(t, in, "compiling program %q: still running after %v", p.Name(), evalDeadline+hangGrace)
		case problem != "":
			failf(t, in, "compiling program %q: %s", p.Name(), problem)
		}
		if err != nil {
			var se *starlib.Error
			if !errors.As(err, &se) {
				failf(t, in, "compiling program %q: error %T is not a *starlib.Error: %v", p.Name(), err, err)
			}
			plan = nil
		}
		out.plans = append(out.plans, plan)
		out.errs = append(out.errs, err)
	}
	return out
}

// checkScript runs every check on one script.
func checkScript(t *testing.T, in input) {
	first := evaluate(t, in, false)
	if first.err != nil {
		if in.correct {
			failf(t, in, "template does not evaluate: %v", first.err)
		}
		return
	}
	// Determinism, and streaming = marshalling.
	second := evaluate(t, in, true)
	if second.err != nil {
		failf(t, in, "second evaluation failed: %v (the first succeeded)", second.err)
	}
	if len(second.plans) != len(first.plans) {
		failf(t, in, "second evaluation made %d programs, the first %d", len(second.plans), len(first.plans))
	}
	for i, p := range first.res.Programs {
		if (first.errs[i] == nil) != (second.errs[i] == nil) ||
			(first.errs[i] != nil && first.errs[i].Error() != second.errs[i].Error()) {
			failf(t, in, "program %q: compile error %v, then %v", p.Name(), first.errs[i], second.errs[i])
		}
		if !bytes.Equal(first.plans[i], second.plans[i]) {
			failf(t, in, "program %q: Plan and WritePlan (of a second evaluation) differ:\n%s", p.Name(), firstDiff(first.plans[i], second.plans[i]))
		}
	}
	// JSON() in the script prints the current (last) program's plan.
	if i := strings.LastIndex(first.stderr, jsonMarker); i >= 0 && len(first.plans) > 0 {
		last := len(first.plans) - 1
		if got := first.stderr[i+len(jsonMarker):]; first.errs[last] == nil && got != string(first.plans[last]) {
			failf(t, in, "JSON() printed a plan that differs from Plan():\n%s", firstDiff([]byte(got), first.plans[last]))
		}
	}
	runs := make([]*session, len(first.plans))
	for i, p := range first.res.Programs {
		if first.errs[i] != nil {
			if in.correct {
				failf(t, in, "template program %q does not compile: %v", p.Name(), first.errs[i])
			}
			continue
		}
		runs[i] = checkPlan(t, in, p, first.plans[i])
	}
	if in.kind == "random" {
		checkFusionVariant(t, in, first, runs)
	}
}

// checkFusionVariant evaluates the script again with instr_fusion
// flipped in every program and runs each program that ran before at the
// same size: fusion must not change what a program computes, so when both
// runs are free of races and deadlocks they must leave the same bytes.
func checkFusionVariant(t *testing.T, in input, orig *evalOutcome, runs []*session) {
	text := strings.NewReplacer("instr_fusion = True", "instr_fusion = False", "instr_fusion = False", "instr_fusion = True").Replace(in.text)
	if text == in.text || !in.fusionSafe {
		// Fusion merges two reductions with the same first source and
		// destination even when the destination is not that source or
		// overlaps another source, which changes the result (reported:
		// tests/fuzzfindings/fusion_reduce_distinct_dst.star).
		return
	}
	vin := in
	vin.kind, vin.text = "random (instr_fusion flipped)", text
	v := evaluate(t, vin, false)
	if v.err != nil || len(v.plans) != len(orig.plans) {
		failf(t, vin, "flipping instr_fusion: evaluation error %v, %d programs; with the original flags it made %d programs", v.err, len(v.plans), len(orig.plans))
	}
	for i, p := range v.res.Programs {
		r := runs[i]
		if r == nil || !comparable(in, r) {
			continue
		}
		if v.errs[i] != nil {
			failf(t, vin, "program %q compiles with the original instr_fusion, not flipped: %v", p.Name(), v.errs[i])
		}
		plan, err := planfmt.Load(v.plans[i])
		if err != nil {
			continue // an unfused glre, say
		}
		layout, err := harness.PlanLayout(plan, r.size, in.dtype, plan.Inplace)
		if err != nil {
			failf(t, vin, "program %q: size %d fits the original plan, not this one: %v", p.Name(), r.size, err)
		}
		inst, err := executor.Instantiate(plan, layout.Sizes)
		if err != nil {
			failf(t, vin, "program %q: size %d fits the original plan, not this one: %v", p.Name(), r.size, err)
		}
		if !launchChecksAgree(t, vin, p.Name(), inst, layout, false) {
			continue
		}
		opts := executor.Options{DType: in.dtype, Race: true, DeadlockTimeout: deadlockTimeout}
		w := runSession(t, vin, p.Name(), inst, layout, opts)
		if !comparable(in, w) {
			continue
		}
		for it := range r.snaps {
			if !bytes.Equal(r.snaps[it], w.snaps[it]) {
				failf(t, vin, "program %q at size %d: with instr_fusion flipped the (race-free) run leaves other bytes after launch %d:\n%s",
					p.Name(), r.size, it, firstDiff(r.snaps[it], w.snaps[it]))
			}
		}
	}
}

// checkPlan checks a compiled plan: load, check, source map, and a run,
// whose first session it returns (nil when there was no run).
func checkPlan(t *testing.T, in input, p *starlib.Program, data []byte) *session {
	if !json.Valid(data) {
		failf(t, in, "program %q: the plan is not valid JSON", p.Name())
	}
	var hard []error
	for _, e := range planfmt.Check(data) {
		if !planfmt.IsWarning(e) {
			hard = append(hard, e)
		}
	}
	plan, err := planfmt.Load(data)
	if (err != nil) != (len(hard) > 0) {
		failf(t, in, "program %q: plan.Load error %v, but plan.Check found %v", p.Name(), err, hard)
	}
	if plan == nil {
		// eval warns of what the MSCCL++ executor cannot run; a clean
		// program without warnings must load.
		if in.clean && len(emit.Warnings(p.IR)) == 0 {
			for _, e := range hard {
				if !errors.Is(e, planfmt.ErrLimit) {
					failf(t, in, "program %q: eval accepts it without a warning, check rejects the plan: %v", p.Name(), hard)
				}
			}
		}
		return nil
	}
	// The source map of eval --source-map attaches to the loaded plan.
	m, err := emit.MarshalSourceMap(p.IR, data, nil)
	if err != nil {
		failf(t, in, "program %q: MarshalSourceMap: %v", p.Name(), err)
	}
	sm, err := planfmt.ParseSourceMap(m)
	if err != nil {
		failf(t, in, "program %q: ParseSourceMap of MarshalSourceMap's map: %v", p.Name(), err)
	}
	if err := plan.AttachSources(sm, data); err != nil {
		failf(t, in, "program %q: AttachSources: %v", p.Name(), err)
	}
	sizes := harness.CheckSizes(plan, in.dtype, 1<<16, 3)
	if len(sizes) == 0 {
		if in.correct {
			failf(t, in, "template program %q: CheckSizes finds no valid message size", p.Name())
		}
		return nil
	}
	tbs := 0
	for _, g := range plan.GPUs {
		tbs += len(g.ThreadBlocks)
	}
	if sizes[0] > maxRunBytes || tbs > maxRunTBs {
		return nil
	}
	// At the other sizes, check --size and the CPU backend's checks
	// before a launch agree.
	for _, size := range sizes[1:] {
		layout, err := harness.PlanLayout(plan, size, in.dtype, plan.Inplace)
		if err != nil {
			failf(t, in, "program %q: size %d from CheckSizes: PlanLayout: %v", p.Name(), size, err)
		}
		inst, err := executor.Instantiate(plan, layout.Sizes)
		if err != nil {
			failf(t, in, "program %q: size %d from CheckSizes: Instantiate: %v", p.Name(), size, err)
		}
		if size <= maxRunBytes {
			launchChecksAgree(t, in, p.Name(), inst, layout, false)
			launchChecksAgree(t, in, p.Name(), inst, layout, true)
		}
	}
	return runPlan(t, in, p.Name(), plan, sizes[0])
}

// launchChecksAgree checks that check --size (executor.CheckLaunch, after
// Instantiate) and the backends (executor.CheckBuffers: what Open and a
// launch check before anything runs) accept inst with the buffers of layout
// alike, with LL packets of 8 bytes or 16, and reports whether they do.
func launchChecksAgree(t *testing.T, in input, name string, inst *executor.Instance, layout *harness.Layout, ll8 bool) bool {
	t.Helper()
	checkErr := executor.CheckLaunch(inst, layout.BufferLayout, ll8)
	runErr := executor.CheckBuffers(inst, executor.Options{DType: in.dtype, LL8: ll8}, layout.Alloc())
	switch {
	case checkErr == nil && runErr != nil:
		failf(t, in, "program %q at size %d (LL8 %v): check accepts the plan, the CPU backend does not: %v", name, layout.Size, ll8, runErr)
	case checkErr != nil && runErr == nil:
		failf(t, in, "program %q at size %d (LL8 %v): check rejects the plan (%v), the CPU backend accepts it", name, layout.Size, ll8, checkErr)
	}
	return checkErr == nil
}

// runPlan runs plan at size as mscclgo check --size and mscclgo run
// --race would, and checks that check and run agree. A run without race
// or deadlock is run again, with the other LL packet size, in a fresh
// session: two runs free of races compute the same bytes (see
// comparable).
func runPlan(t *testing.T, in input, name string, plan *planfmt.Plan, size uint64) *session {
	layout, err := harness.PlanLayout(plan, size, in.dtype, plan.Inplace)
	if err != nil {
		failf(t, in, "program %q: size %d from CheckSizes: PlanLayout: %v", name, size, err)
	}
	inst, err := executor.Instantiate(plan, layout.Sizes)
	if err != nil {
		failf(t, in, "program %q: size %d from CheckSizes: Instantiate: %v", name, size, err)
	}
	if rs := executor.CheckReuse(inst); in.correct && len(rs) > 0 {
		failf(t, in, "template program %q at size %d: check warns of %d buffer(s) reused in the next launch with no handshake; the first: %v", name, size, len(rs), rs[0])
	}
	opts := executor.Options{DType: in.dtype, Race: true, DeadlockTimeout: deadlockTimeout}
	launchChecksAgree(t, in, name, inst, layout, false)
	first := runSession(t, in, name, inst, layout, opts)
	if in.correct && first.outcome == "deadlock" && strings.Contains(first.err.Error(), "no progress for") {
		// The watchdog, not a deadlock of parked thread blocks: on a busy
		// machine a correct plan may make no progress for a second. Run
		// again with more patience.
		opts.DeadlockTimeout = 3 * deadlockTimeout
		first = runSession(t, in, name, inst, layout, opts)
		opts.DeadlockTimeout = deadlockTimeout
	}
	if in.correct && first.outcome != "" {
		failf(t, in, "template program %q at size %d (%s): %s: %v", name, size, in.dtype.Name(), first.outcome, first.err)
	}
	if !comparable(in, first) {
		return first
	}
	opts.LL8 = len(in.text)%2 == 1
	if !launchChecksAgree(t, in, name, inst, layout, opts.LL8) {
		return first
	}
	second := runSession(t, in, name, inst, layout, opts)
	if !comparable(in, second) {
		return first
	}
	for it := range first.snaps {
		if !bytes.Equal(first.snaps[it], second.snaps[it]) {
			failf(t, in, "program %q at size %d: race detection found no race in two runs, yet they differ after launch %d (LL8 %v in the second):\n%s",
				name, size, it, opts.LL8, firstDiff(first.snaps[it], second.snaps[it]))
		}
	}
	return first
}

// comparable reports whether run r of in's program may be compared with
// another run: it ended without deadlock or race, and the program has
// neither a semaphore nor port transfers of two thread blocks of a rank
// that touch the same bytes, one writing (portWritesOverlap). Race
// detection sees the happens-before order of the run it watches, so two
// runs free of races can still differ when that order depends on the
// schedule: a semaphore used as a lock (whichever thread block acquires
// first writes first), or the port FIFO a rank's thread blocks share (its
// order is an edge, docs/executor.md §5, so the proxy's accesses for two
// thread blocks never race, but their order depends on who pushed first).
func comparable(in input, r *session) bool {
	return (r.outcome == "" || r.outcome == "wrong") && !r.portOverlap && !strings.Contains(in.text, "Semaphore(")
}

// portWritesOverlap reports whether a rank's proxy, serving two thread
// blocks, writes bytes for one that it reads or writes for the other.
// Regions of an in-place plan's input and output count as overlapping
// whatever their offsets.
func portWritesOverlap(inst *executor.Instance) bool {
	type access struct {
		tb    int
		r     executor.Region
		write bool
	}
	inplace := inst.Plan != nil && inst.Plan.Inplace
	overlap := func(a, b executor.Region) bool {
		if a.Rank != b.Rank {
			return false
		}
		if a.Buffer != b.Buffer {
			return inplace && a.Buffer != planfmt.Scratch && b.Buffer != planfmt.Scratch
		}
		return a.Offset < b.Offset+b.Size && b.Offset < a.Offset+a.Size
	}
	for _, ri := range inst.Ranks {
		var accesses []access
		var collect func(tb int, ops []executor.OpInstance)
		collect = func(tb int, ops []executor.OpInstance) {
			for _, op := range ops {
				collect(tb, op.Body)
				if op.ChannelType != planfmt.Port {
					continue
				}
				switch op.Type {
				case planfmt.OpPut, planfmt.OpPutWithSignal, planfmt.OpPutWithSignalAndFlush, planfmt.OpPutPacket, planfmt.OpReadPutPacket:
					for _, d := range op.Dst {
						accesses = append(accesses, access{tb, d, true})
					}
					for _, r := range op.Src {
						accesses = append(accesses, access{tb, r, false})
					}
				}
			}
		}
		for _, tb := range ri.TBs {
			collect(tb.ID, tb.Ops)
		}
		for i, a := range accesses {
			for _, b := range accesses[i+1:] {
				if a.tb != b.tb && (a.write || b.write) && overlap(a.r, b.r) {
					return true
				}
			}
		}
	}
	return false
}

// session is the outcome of runSession.
type session struct {
	size        uint64
	portOverlap bool   // see comparable
	outcome     string // "", "deadlock", "race" or "wrong"
	err         error  // the deadlock, race or wrong-result report
	snaps       [][]byte
}

// runSession opens inst on the CPU backend with opts and launches it
// iters times, filling and checking as mscclgo run does; snaps are every
// rank's input and output after each launch. Errors of the backend other
// than a deadlock or a race, and a hang, fail the test.
func runSession(t *testing.T, in input, name string, inst *executor.Instance, layout *harness.Layout, opts executor.Options) *session {
	t.Helper()
	out := &session{size: layout.Size, portOverlap: portWritesOverlap(inst)}
	checker := in.checker
	if checker == nil {
		checker = harness.NewChecker()
	}
	var fail error
	bufs := layout.Alloc()
	problem := guarded(runDeadline+hangGrace, func() {
		sess, err := cpu.New().Open(inst, opts)
		if err != nil {
			fail = fmt.Errorf("Open: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), runDeadline)
		defer cancel()
		for it := 0; it < iters && out.outcome != "deadlock"; it++ {
			if err := checker.FillInputs(layout, bufs, it); err != nil {
				fail = fmt.Errorf("launch %d: FillInputs: %w", it, err)
				return
			}
			err := sess.Launch(ctx, bufs)
			var dl *executor.DeadlockError
			var race *executor.RaceError
			switch {
			case errors.As(err, &dl):
				out.outcome, out.err = "deadlock", err
				continue
			case errors.As(err, &race):
				out.outcome, out.err = "race", err
			case err != nil && ctx.Err() != nil:
				fail = fmt.Errorf("launch %d still running after %v (a hang; canceled): %w", it, runDeadline, err)
				return
			case err != nil:
				fail = fmt.Errorf("launch %d: %w", it, err)
				return
			}
			var snap []byte
			for _, b := range bufs {
				snap = append(append(snap, b.Input...), b.Output...)
			}
			out.snaps = append(out.snaps, snap)
			if !layout.Checked() {
				continue
			}
			wrong, err := checker.Check(layout, bufs, it)
			if err != nil {
				fail = fmt.Errorf("launch %d: Check: %w", it, err)
				return
			}
			for r, w := range wrong {
				if w > 0 && out.outcome == "" {
					out.outcome, out.err = "wrong", fmt.Errorf("launch %d: rank %d has %d wrong elements", it, r, w)
				}
			}
		}
		if err := sess.Close(); err != nil && out.outcome != "deadlock" {
			fail = fmt.Errorf("Close: %w", err)
		}
	})
	switch {
	case problem == "hung":
		failf(t, in, "program %q: run at size %d (%+v) still running %v after its %v deadline", name, layout.Size, opts, hangGrace, runDeadline)
	case problem != "":
		failf(t, in, "program %q: run at size %d (%+v): %s", name, layout.Size, opts, problem)
	case fail != nil:
		failf(t, in, "program %q: check accepts the plan at size %d, the CPU backend (%+v) fails: %v", name, layout.Size, opts, fail)
	}
	return out
}

// firstDiff shows where two texts first differ.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("at byte %d:\n  %q\nvs\n  %q", i, a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}

// seedChoices are choice sequences for the generators: empty (the
// smallest random program), a template of each kind, and random programs
// from fixed pseudo-random bytes.
func seedChoices() [][]byte {
	seeds := [][]byte{{}, {1}}
	for k := range templateKinds() {
		// The first byte selects a template, the second its kind; the
		// rest sizes it (n, f, inplace, tbs, instances, fusion, sync).
		seeds = append(seeds, []byte{0, byte(k), 2, 1, byte(k), 3, 1, 3, 3, 7, 11, 13, 200, 100})
	}
	x := uint32(2463534242)
	for i := 0; i < 6; i++ {
		b := make([]byte, 64+32*i)
		for j := range b {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b[j] = byte(x)
		}
		if b[0]%templateEvery == 0 {
			b[0] = 1
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// seedScripts are fixed scripts: the programs of tests/testdata, the
// bundled algorithms (their loads resolve against algorithms/, see
// source), and small ones of each DSL feature.
func seedScripts(f *testing.F) [][]byte {
	var out [][]byte
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*.star"))
	algos, _ := filepath.Glob(filepath.Join("..", "..", "algorithms", "*.star"))
	for _, file := range append(files, algos...) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	for _, s := range []string{
		"n = param(\"num_gpus\", 2)\nCollectiveProgram(\"ag\", AllGather(n, 1, True), n)\nfor src in range(n):\n    chunk = Rank(src).get_output_buffer()[src:src + 1]\n    for dst in range(n):\n        if dst != src:\n            ch = MemoryChannel(dst, src)\n            ch.put(Rank(dst).get_output_buffer()[src:src + 1], chunk, tb = 0)\n            ch.signal(tb = 0, data_sync = SyncType.before)\n            MemoryChannel(src, dst).wait(tb = 0, data_sync = SyncType.after)\n",
		"CollectiveProgram(\"pipe\", TestCollective(1, 2, 2), 1)\nrank = Rank(0)\ninp, out = rank.get_input_buffer(), rank.get_output_buffer()\nfor _ in Loop.iteration(unit = 1 << 20, num_chunks = 1):\n    rank.copy(out[0:1], inp[0:1], tb = 0)\n    rank.copy(out[1:2], inp[1:2], tb = 1)\n",
		"n = 4\nCollectiveProgram(\"nvls\", AllReduce(n, 1, True), n)\nsw = SwitchChannel(list(range(n)), BufferType.input)\nfor r in range(n):\n    inp = Rank(r).get_input_buffer()\n    member = sw.at_rank(r)\n    member.reduce(buffer_offset = r, size = 1, dst_chunk = inp[r:r + 1], tb = 0)\n    member.broadcast(src_chunk = inp[r:r + 1], buffer_offset = r, size = 1, tb = 0)\n",
		"CollectiveProgram(\"sem\", TestCollective(1, 2, 2), 1)\nrank = Rank(0)\ninp, out = rank.get_input_buffer(), rank.get_output_buffer()\nready = Semaphore(0, 0)\nrank.copy(out[0:2], inp[0:2], tb = 0)\nready.release(tb = 0)\nready.acquire(tb = 1, data_sync = SyncType.after)\nrank.copy(inp[0:2], out[0:2], tb = 1)\n",
		"CollectiveProgram(\"port\", SendRecv(2, 1, False), 2)\nfor r in range(2):\n    peer = 1 - r\n    ch = PortChannel(peer, r)\n    ch.put_with_signal(Rank(peer).get_output_buffer()[0:1], Rank(r).get_input_buffer()[0:1], tb = 0)\n    ch.wait(tb = 0, data_sync = SyncType.after)\n",
		"load(\"lib/common.star\", \"others\")\nCollectiveProgram(\"tbg\", AllGather(2, 4, True), 2, instances = 2)\ngroup = ThreadBlockGroup([0, 1, 2, 3])\nfor r in range(2):\n    peer = others(r, 2)[0]\n    out = Rank(r).get_output_buffer()\n    ch = MemoryChannel(peer, r)\n    ch.put(Rank(peer).get_output_buffer()[4 * r:4 * r + 4], out[4 * r:4 * r + 4], tb_group = group)\n    ch.signal(tb = 0, data_sync = SyncType.before)\n    ch.wait(tb = 0, data_sync = SyncType.after)\nprint(\"" + jsonMarker + "\" + JSON())\n",
		"def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\nx = [f(i) for i in range(12)]\ny = (1 << 300) // 7\nwhile len(x) > 3:\n    x.pop()\nCollectiveProgram(\"s\" * 3, AllReduce(2, 1, False), 2, protocol = \"LL\")\n",
		"for i in range(1 << 40):\n    pass\n",
	} {
		out = append(out, []byte(s))
	}
	return out
}

// TestGeneratorYield keeps FuzzEval meaningful as the language changes:
// most random programs must evaluate, compile and pass check (and many
// be clean), and every template must, or the fuzzer would spend its time
// on evaluation errors.
func TestGeneratorYield(t *testing.T) {
	const n = 300
	x := uint32(88172645)
	var ok, clean int
	for i := 0; i < n; i++ {
		data := make([]byte, 40+i%200)
		for j := range data {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			data[j] = byte(x)
		}
		template := i%4 == 0
		switch {
		case template:
			data[0] = 0
		case data[0]%templateEvery == 0:
			data[0] = 1
		}
		in := generate(data)
		if in.clean {
			clean++
		}
		opts := starlib.Options{}
		opts.MaxSteps = maxSteps
		res, err := starlib.Eval(source{[]byte(in.text)}, mainName, opts)
		good := err == nil && len(res.Programs) > 0
		if good {
			for _, p := range res.Programs {
				plan, err := p.Plan()
				if err != nil {
					good = false
					break
				}
				if _, err := planfmt.Load(plan); err != nil {
					good = false
				}
			}
		}
		switch {
		case good:
			ok++
		case template:
			t.Errorf("template does not evaluate, compile and load (%v):\n%s", err, in.text)
		}
	}
	random := n - n/4
	t.Logf("%d of %d programs load, %d of %d random programs are clean", ok, n, clean-n/4, random)
	if ok-n/4 < random*35/100 {
		t.Errorf("only %d of %d random programs evaluate, compile and load: the generator no longer fits the language", ok-n/4, random)
	}
	if clean-n/4 < random*30/100 {
		t.Errorf("only %d of %d random programs are clean", clean-n/4, random)
	}
}
