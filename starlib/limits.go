// Evaluation limits: the wall-clock limit, the memory budget, the step
// limit as builtins count towards it, and the fixed limits on ranks,
// instances, integers and nesting. A meter enforces them for one
// evaluation; a watcher goroutine samples the clock and the heap and
// cancels the thread when a limit is passed.

package starlib

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"

	"github.com/mscclgo/mscclgo/internal/memlimit"
	"github.com/mscclgo/mscclgo/plan"
)

// Defaults of the limits an evaluation runs under, far above what any
// real algorithm needs: a 1024-rank hierarchical allgather evaluates in
// about 11 s with 1.6 GB of heap, fewer than 300 million steps, and
// records 1.7 million ops.
const (
	// DefaultMaxTime is the default wall-clock limit of an evaluation.
	DefaultMaxTime = 2 * time.Minute
	// DefaultMaxMemory is the default budget, in bytes, for the heap an
	// evaluation may grow by.
	DefaultMaxMemory = 4 << 30
	// DefaultMaxOps is the default limit on the ops one program records,
	// counted after replication into its instances.
	DefaultMaxOps = 4_000_000
)

// Fixed limits: values past them are mistakes, never algorithms.
const (
	// MaxRanks bounds num_ranks.
	MaxRanks = plan.MaxRanks
	// MaxChunks bounds the chunks of a collective's buffer.
	MaxChunks = 1 << 24
	// MaxInstances bounds a program's instances.
	MaxInstances = 1 << 12
	// MaxIntBits bounds the size of an integer an operator may produce.
	MaxIntBits = 1 << 20
	// MaxNesting bounds how deeply lists, tuples and dicts may nest in a
	// value that is turned into a string.
	MaxNesting = 10_000
)

// Limits bounds an evaluation. Zero fields take the defaults.
type Limits struct {
	// MaxSteps bounds the Starlark steps, builtin iterations included.
	MaxSteps uint64
	// MaxTime bounds the evaluation's wall-clock time.
	MaxTime time.Duration
	// MaxMemory bounds, in bytes, how far the heap may grow.
	MaxMemory uint64
	// MemorySource says what set a MaxMemory below DefaultMaxMemory by
	// default (DefaultMemory); empty for a budget given or the default.
	MemorySource string
	// MaxOps bounds the ops of each program, instances included.
	MaxOps int
}

// withDefaults returns l with zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxTime <= 0 {
		l.MaxTime = DefaultMaxTime
	}
	if l.MaxMemory == 0 {
		l.MaxMemory, l.MemorySource = DefaultMemory()
	}
	if l.MaxOps <= 0 {
		l.MaxOps = DefaultMaxOps
	}
	return l
}

// Messages of the limits, each naming the flag that changes it.
func stepsMsg(n uint64) string {
	return fmt.Sprintf("step limit of %d exceeded (a runaway loop? --max-steps raises the limit)", n)
}

func timeMsg(d time.Duration) string {
	return fmt.Sprintf("evaluation ran past the time limit of %v (--max-time raises it)", d)
}

// memoryMsg is the message of the heap watcher's stop: the evaluation
// grew by grown bytes, past l's budget.
func memoryMsg(l Limits, grown uint64) string {
	return fmt.Sprintf("evaluation grew to about %s, past %s", bytesText(grown), budgetText(l))
}

// budgetText names the memory budget of l, what set it, and the flag.
func budgetText(l Limits) string {
	if l.MemorySource == "" {
		return fmt.Sprintf("the memory budget of %s (--max-memory raises it)", bytesText(l.MaxMemory))
	}
	return fmt.Sprintf("the memory budget of %s (by default a third of what this process may still use, bounded by %s; --max-memory sets the budget)", bytesText(l.MaxMemory), l.MemorySource)
}

// DefaultMemory returns the default memory budget of an evaluation:
// DefaultMaxMemory, or less where this process may not use that much
// (memlimit: the address-space limit less what is reserved, the cgroup's
// limit, the available memory), with what bounds it then. The Go heap
// grows past the budget (garbage not yet collected, the soft limit the
// command sets a quarter above it, the runtime's own memory) and a value
// that doubles (a dict's table, a list's array) needs its old and new
// storage at once, so the budget is a third of the headroom less 512 MiB.
func DefaultMemory() (uint64, string) {
	h := memlimit.Now()
	if h.What == "" {
		return DefaultMaxMemory, ""
	}
	usable := uint64(0)
	if h.Bytes > 512<<20 {
		usable = (h.Bytes - 512<<20) / 3
	}
	if usable >= DefaultMaxMemory {
		return DefaultMaxMemory, ""
	}
	return max(usable, minDefaultMemory), h.What
}

// minDefaultMemory is the least default budget: below it the evaluation
// fails at once with the budget named.
const minDefaultMemory = 16 << 20

// bytesText writes n bytes in the largest binary unit that keeps it at
// least 1.
func bytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// meter enforces the limits of one evaluation. The interpreter calls it
// back every stepSlice steps (OnMaxSteps); there it stops the thread when
// the step limit is reached or the watcher goroutine, which samples the
// clock and the heap, has found a limit passed.
type meter struct {
	lim    Limits
	thread *starlark.Thread
	// base is the heap in use when the evaluation started.
	base uint64
	// heap is the heap in use at the watcher's last sample.
	heap atomic.Uint64
	// stop is the reason the evaluation must stop, once a limit is hit.
	stop atomic.Pointer[string]
	// pending is the reason the callback is about to cancel the thread
	// for, once the interpreter stands on a statement with a position.
	pending string
	// waited counts the steps the callback waited for such a position.
	waited int
	done   chan struct{}
	// callbacks counts the interpreter's step callbacks: a stopped
	// evaluation still calling back is about to stop by itself.
	callbacks atomic.Uint64
	// halted is closed when the first reason to stop is recorded.
	halted   chan struct{}
	haltOnce sync.Once
}

// stepSlice is how many steps the interpreter runs between callbacks.
const stepSlice = 1 << 16

// maxWait bounds the steps the callback waits for a positioned
// instruction before it cancels anyway.
const maxWait = 256

// heapSample is the runtime metric the memory budget is checked against:
// the bytes of heap objects, live or not yet swept.
const heapSample = "/memory/classes/heap/objects:bytes"

func readHeap() uint64 {
	s := []metrics.Sample{{Name: heapSample}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watchEvery is how often the watcher samples the clock and the heap.
const watchEvery = 10 * time.Millisecond

// startMeter sets thread's step callback and starts the watcher, which
// runs until stopMeter.
func startMeter(thread *starlark.Thread, lim Limits) *meter {
	m := &meter{lim: lim.withDefaults(), thread: thread, done: make(chan struct{}), halted: make(chan struct{})}
	m.base = readHeap()
	m.heap.Store(m.base)
	thread.SetMaxExecutionSteps(min(stepSlice, m.lim.MaxSteps))
	thread.OnMaxSteps = m.onSteps
	go m.watch(time.Now())
	return m
}

func (m *meter) stopMeter() { close(m.done) }

// halt records why the evaluation must stop; the first reason wins. The
// interpreter stops at its next callback, builtins at their next step.
func (m *meter) halt(reason string) {
	m.stop.CompareAndSwap(nil, &reason)
	m.haltOnce.Do(func() { close(m.halted) })
}

// haltNow is halt from the evaluation's own goroutine (a builtin): the
// interpreter stops at its next instruction.
func (m *meter) haltNow(reason string) {
	m.halt(reason)
	m.thread.SetMaxExecutionSteps(m.thread.Steps)
}

// onSteps is the interpreter's step callback. When a limit is hit it
// cancels the thread, but first lets the interpreter run on (up to maxWait
// steps) while the current frame has no position of its own yet: the
// interpreter reports the position of the instruction before the one it
// stops at, and at the top of a loop body that is the enclosing def.
func (m *meter) onSteps(th *starlark.Thread) {
	m.callbacks.Add(1)
	if m.pending == "" {
		if th.Steps >= m.lim.MaxSteps {
			m.halt(stepsMsg(m.lim.MaxSteps))
		}
		r := m.stop.Load()
		if r == nil {
			th.SetMaxExecutionSteps(min(th.Steps+stepSlice, m.lim.MaxSteps))
			return
		}
		m.pending = *r
	}
	if m.waited < maxWait && !positioned(th) {
		m.waited++
		th.SetMaxExecutionSteps(th.Steps + 1)
		return
	}
	th.Cancel(m.pending)
}

// positioned reports whether the innermost frame stands past the start of
// its function, so that its position is a statement's.
func positioned(th *starlark.Thread) bool {
	if th.CallStackDepth() == 0 {
		return true
	}
	fr := th.DebugFrame(0)
	fn, ok := fr.Callable().(*starlark.Function)
	if !ok {
		return true
	}
	return fr.Position() != fn.Position()
}

// watch samples the clock and the heap until the evaluation ends.
func (m *meter) watch(start time.Time) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case now := <-t.C:
			if now.Sub(start) > m.lim.MaxTime {
				m.halt(timeMsg(m.lim.MaxTime))
				return
			}
			h := readHeap()
			if m.grown(h) > m.lim.MaxMemory {
				// Garbage counts until it is swept: collect, and stop
				// only if the live heap is over the budget too.
				runtime.GC()
				h = readHeap()
				if m.grown(h) > m.lim.MaxMemory {
					m.heap.Store(h)
					m.halt(memoryMsg(m.lim, m.grown(h)))
					return
				}
			}
			m.heap.Store(h)
		}
	}
}

// grown is how far heap h is above the evaluation's starting heap.
func (m *meter) grown(h uint64) uint64 {
	if h < m.base {
		return 0
	}
	return h - m.base
}

// stopped returns the reason to stop as an error, or nil.
func (m *meter) stopped() error {
	if r := m.stop.Load(); r != nil {
		return fmt.Errorf("%s", *r)
	}
	return nil
}

// step counts one iteration of a builtin as an interpreter step and
// reports a passed limit.
func (m *meter) step() error {
	m.thread.Steps++
	if m.thread.Steps&1023 == 0 {
		if m.thread.Steps >= m.lim.MaxSteps {
			m.halt(stepsMsg(m.lim.MaxSteps))
		}
		return m.stopped()
	}
	return nil
}

// reserve checks that a value of n bytes fits in what is left of the
// memory budget; what names the value for the error.
func (m *meter) reserve(n uint64, what string) error {
	if err := m.stopped(); err != nil {
		return err
	}
	used := m.grown(m.heap.Load())
	if n <= m.lim.MaxMemory && used+n > m.lim.MaxMemory {
		// The sample counts garbage until it is swept: collect first.
		runtime.GC()
		h := readHeap()
		m.heap.Store(h)
		used = m.grown(h)
	}
	if n > m.lim.MaxMemory || used+n > m.lim.MaxMemory {
		return fmt.Errorf("%s would need about %s, over what is left of %s",
			what, bytesText(n), budgetText(m.lim))
	}
	return nil
}

// meterOf returns the meter of thread's evaluation, or nil outside one.
func meterOf(thread *starlark.Thread) *meter {
	if s := stateOf(thread); s != nil {
		return s.meter
	}
	return nil
}
