package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/planset"
)

// collective is enum mscclgo_coll of shim.h.
type collective int

const (
	collAllReduce collective = iota
	collAllGather
	collReduceScatter
	collBroadcast
	collReduce
	collSend
	collRecv
)

// planName is the collective's name in a plan set; "" where mscclgo has
// no plans for it.
func (c collective) planName() string {
	switch c {
	case collAllReduce:
		return "allreduce"
	case collAllGather:
		return "allgather"
	case collReduceScatter:
		return "reducescatter"
	}
	return ""
}

// call is one collective or point-to-point call (struct mscclgo_call).
type call struct {
	fn          string
	coll        collective
	send, recv  uintptr        // the buffers' addresses, for NCCL's in-place rule
	sendPtr     unsafe.Pointer // the same, to read and write (host-memory runs)
	recvPtr     unsafe.Pointer
	count       uint64
	dtype       int // ncclDataType_t
	op          int // ncclRedOp_t; -1 where fn has none
	peer        int
	stream      uintptr
	hasFallback bool
	groupDepth  int
	deferred    bool // run at the end of its group (groupDepth is the depth it was made at)
	hostMem     bool // the buffers are host memory (mscclgoExecuteHost): run on the CPU backend
	// premul is set for mscclgo.h's MSCCLGO_PREMUL_SUM (op is then
	// opPreMulSum): scalar is its one element of dtype, this rank's.
	premul bool
	scalar []byte
	// recvParts is set for mscclgoExecuteHostGather: an allgather whose
	// rank j's block lands in recvParts[j] (one buffer per rank, each a
	// block long), not in one buffer; recv and recvPtr are then 0 and
	// nil, and the call is out of place.
	recvParts [][]byte
}

// dtypeNames are ncclDataType_t's names; elemSize their sizes.
var dtypeNames = [...]string{"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"}

func dtypeName(d int) string {
	if d >= 0 && d < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("data type %d", d)
}

// elemSize is the size of an element of d in bytes; 0 for an unknown type.
func elemSize(d int) uint64 {
	switch d {
	case 0, 1:
		return 1
	case 6, 9:
		return 2
	case 2, 3, 7:
		return 4
	case 4, 5, 8:
		return 8
	}
	return 0
}

// planElem reports whether plans run elements of d (float16, float32,
// int32, bfloat16: the executor's element types).
func planElem(d int) bool { return d == 6 || d == 7 || d == 2 || d == 9 }

var opNames = [...]string{"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"}

func opName(op int) string {
	if op >= 0 && op < len(opNames) {
		return opNames[op]
	}
	return fmt.Sprintf("user-defined reduction %d", op)
}

// opLabel is k's reduction as logs and signatures name it.
func (k call) opLabel() string {
	if k.premul {
		return "MSCCLGO_PREMUL_SUM"
	}
	return opName(k.op)
}

// decision is what a call gets: the plan that fits it, or none and why.
type decision struct {
	plan string // the plan that fits the call, "" for none
	path string // its file
	why  string // why it fits, or why no plan does
	// viaCopy is set when the plan is in place and the call is not: the
	// call copies its input to where the plan reads it, then runs the
	// plan in place.
	viaCopy bool
	// viaStage is set when the plan is out of place and the call is in
	// place: the plan reads a staged copy of the input.
	viaStage bool
	// planInPlace is the placement the plan is laid out for.
	planInPlace bool
	// devKey and devDesc are the device path's plan-instance key and
	// call description (runOnDevice), and open its plan's opener, made
	// once per cached decision.
	devKey, devDesc string
	open            func() (*executor.Instance, *executor.BufferLayout, executor.Options, error)
	// padCount, when not 0, is the count per rank block the plan runs,
	// above the call's (no plan takes the call's whole): the call runs
	// through a staging buffer of that layout (pad.go).
	padCount uint64
	// generic is set, with plan "", where no plan serves the call but the
	// built-in path does on host memory (generic.go).
	generic bool
	// bulkCount, for a padded allreduce, is the largest count the same
	// plan takes whole (0: none): ranks as threads run it on the callers'
	// buffers and the rest of the elements on the built-in path, with no
	// staging copy (hostrun.go); bulkInPlace is the bulk plan's
	// placement.
	bulkCount   uint64
	bulkInPlace bool
}

// builtinName is what mscclgoSelect answers for a call of the built-in
// path.
const builtinName = "builtin"

// padded reports whether d runs its plan on a padded layout.
func (d decision) padded() bool { return d.padCount != 0 }

// layoutOf is call k's layout under decision d (count per rank block:
// the call's, and the plan's).
func (c *comm) layoutOf(k call, d decision) layout {
	l := layout{coll: k.coll, n: c.size, rank: c.rank, es: elemSize(k.dtype), count: k.count, padded: k.count}
	if d.padCount != 0 {
		l.padded = d.padCount
	}
	return l
}

// planSize is the message size the plan of d runs for call k.
func (c *comm) planSize(k call, d decision) uint64 {
	return c.layoutOf(k, d).planSize()
}

// decideKey is what a decision depends on, besides the communicator.
type decideKey struct {
	fn      string
	coll    collective
	count   uint64
	dtype   int
	op      int
	inPlace bool
}

// maxDecisions bounds a communicator's decision cache; a full cache is
// emptied (a sweep of many sizes makes new entries, a training loop
// repeats a few).
const maxDecisions = 4096

// decisions caches a communicator's decisions by call, so that a
// steady-state call chooses no plan and formats no string (issue 30).
type decisions struct {
	mu sync.Mutex
	m  map[decideKey]decision
	// last is the last call's key and decision: a steady loop makes the
	// same call again and again, and a key compared costs less than one
	// hashed.
	lastKey decideKey
	last    *decision
}

// decideCached is decide's answer for k, from the cache after the first
// call of its kind; the device path's strings are made with it.
func (c *comm) decideCached(k call) decision {
	key := decideKey{fn: k.fn, coll: k.coll, count: k.count, dtype: k.dtype, op: k.op, inPlace: k.inPlace(c.rank)}
	c.decided.mu.Lock()
	if c.decided.last != nil && c.decided.lastKey == key {
		d := *c.decided.last
		c.decided.mu.Unlock()
		return d
	}
	d, ok := c.decided.m[key]
	if ok {
		c.decided.lastKey, c.decided.last = key, &d
	}
	c.decided.mu.Unlock()
	if ok {
		return d
	}
	d = c.decide(k)
	if d.plan != "" {
		d.devKey, d.devDesc = c.deviceStrings(k, d)
		d.open = c.opener(k, d)
	}
	c.decided.mu.Lock()
	if c.decided.m == nil || len(c.decided.m) >= maxDecisions {
		c.decided.m = map[decideKey]decision{}
	}
	c.decided.m[key] = d
	c.decided.lastKey, c.decided.last = key, &d
	c.decided.mu.Unlock()
	return d
}

// inPlace reports whether c is in place, as NCCL defines it per
// collective: allgather's input is the rank's slice of its output,
// reducescatter's output the rank's slice of its input.
func (c call) inPlace(rank int) bool {
	bytes := c.count * elemSize(c.dtype)
	switch c.coll {
	case collAllGather:
		return c.send == c.recv+uintptr(uint64(rank)*bytes)
	case collReduceScatter:
		return c.recv == c.send+uintptr(uint64(rank)*bytes)
	}
	return c.send == c.recv
}

// size is the call's message size as plans count it: the output for
// allgather, the input otherwise.
func (c call) size(worldSize int) uint64 {
	bytes := c.count * elemSize(c.dtype)
	if c.coll == collAllGather || c.coll == collReduceScatter {
		return bytes * uint64(worldSize)
	}
	return bytes
}

// decide chooses the plan of the communicator's plan set for one call, if
// one fits. select's rules pick it (collective, size, world size, ranks
// per node, in-place); the data type and the reduction must be ones plans
// compute. A size no plan takes whole is padded (pad.go). Where no plan
// serves the call, generic says whether the built-in path can (on host
// memory), and why says what a plan would have needed.
func (c *comm) decide(k call) decision {
	name := k.coll.planName()
	switch {
	case name == "":
		return decision{why: fmt.Sprintf("mscclgo has no plans for %s", k.fn)}
	case elemSize(k.dtype) == 0:
		return decision{why: fmt.Sprintf("unknown data type %d", k.dtype)}
	case k.coll.hasOp() && k.op >= numOps && !k.premul:
		return decision{why: fmt.Sprintf("%s: reductions made by ncclRedOpCreatePreMulSum are the fallback NCCL's", opName(k.op))}
	case !planElem(k.dtype):
		return decision{why: fmt.Sprintf("%s: plans compute float16, bfloat16, float32 and int32", dtypeName(k.dtype)), generic: true}
	case c.plans.err != nil:
		// A plan set that cannot be read is the installation's error,
		// told, not passed over by the built-in path.
		return decision{why: c.plans.err.Error()}
	}
	callInPlace := k.inPlace(c.rank)
	req := planset.Request{
		Collective:   name,
		WorldSize:    c.size,
		RanksPerNode: c.ranksPerNode,
		Size:         k.size(c.size),
		InPlace:      callInPlace,
		ElementSize:  int(elemSize(k.dtype)),
		// On host memory the plan is the cheapest on the CPU backend,
		// not the one of a GPU's size ranges (planset.HostCostUS).
		Host: c.gpu == nil || k.hostMem,
	}
	if c.gpu != nil && !k.hostMem {
		// On the device every rank runs the same plan instance, so
		// the plan is chosen from what every rank shares: the
		// collective's device placement, not this rank's (placement
		// is each rank's own in NCCL); a rank whose placement is not
		// the plan's copies its input (runOnDevice).
		req.InPlace = devicePlace(k.coll)
	} else if c.procs != nil && c.gpu == nil {
		// Ranks as processes run in session buffers of their own, so
		// the caller's placement does not matter to the run; the plan
		// is chosen from what every rank shares (placement is each
		// rank's own in NCCL), out of place first.
		req.InPlace = false
	}
	choice, planInPlace, padBlock, err := selectPadded(c.plans.sources, req, k.coll, k.count*elemSize(k.dtype))
	if errors.Is(err, planset.ErrNoPlan) && len(c.plans.sources) == 0 {
		return decision{why: fmt.Sprintf("no plan set installed (searched %v; run mscclgo install, or set MSCCLGO_PLAN_PATH)", c.plans.dirs), generic: true}
	}
	if errors.Is(err, planset.ErrNoPlan) {
		return decision{why: noPlanWhy(c.plans.sources, req, err), generic: true}
	}
	if err != nil {
		return decision{why: err.Error()}
	}
	d := decision{plan: choice.Entry.Name, path: filepath.Join(choice.Dir, choice.Entry.File),
		why: fmt.Sprintf("plan %s fits (%s)", choice.Entry.Name, choice.Why), planInPlace: planInPlace}
	if padBlock != 0 {
		d.padCount = padBlock / elemSize(k.dtype)
		d.why = fmt.Sprintf("plan %s fits (%s) at %d elements per rank, padded from %d (no plan takes %d bytes whole)", choice.Entry.Name, choice.Why, d.padCount, k.count, req.Size)
		if k.coll == collAllReduce {
			if b := bulkBlock(choice.Entry, req, uint64(c.size), elemSize(k.dtype), req.Size); b > 0 {
				d.bulkCount, d.bulkInPlace = b/elemSize(k.dtype), planInPlace
			}
		}
		return d
	}
	d.viaCopy = planInPlace && !callInPlace
	d.viaStage = !planInPlace && callInPlace
	switch {
	case planInPlace != req.InPlace:
		d.why = fmt.Sprintf("no %s plan fits; %s plan %s fits (%s) after a copy of the input", placeName(req.InPlace), placeName(planInPlace), choice.Entry.Name, choice.Why)
	case planInPlace != callInPlace:
		d.why = fmt.Sprintf("%s plan %s fits (%s), the device's choice for %s whatever each rank's placement, after a copy of the input", placeName(planInPlace), choice.Entry.Name, choice.Why, k.fn)
	}
	return d
}

// noPlanWhy says why no plan of sources serves req (select's error err):
// the world sizes and ranks per node the set has plans of the collective
// for, or the size ranges of those of req's shape.
func noPlanWhy(sources []planset.Source, req planset.Request, err error) string {
	shapes := map[string]bool{}
	var list []string
	var ranges []string
	for _, s := range sources {
		for _, e := range s.Index.Plans {
			if e.Collective != req.Collective {
				continue
			}
			if e.WorldSize == req.WorldSize && e.RanksPerNode == req.RanksPerNode {
				ranges = append(ranges, fmt.Sprintf("%s takes [%d, %d] bytes", e.Name, e.MinMessageSize, e.MaxMessageSize))
				continue
			}
			sh := fmt.Sprintf("%d ranks (%d per node)", e.WorldSize, e.RanksPerNode)
			if !shapes[sh] {
				shapes[sh] = true
				list = append(list, sh)
			}
		}
	}
	switch {
	case len(ranges) > 0:
		return fmt.Sprintf("%v: %s", err, strings.Join(ranges, ", "))
	case len(list) > 0:
		sort.Strings(list)
		return fmt.Sprintf("%v: the plan set has %s plans for %s only", err, req.Collective, strings.Join(list, ", "))
	}
	return fmt.Sprintf("%v: the plan set has no %s plans", err, req.Collective)
}

// devicePlace is the placement of the plan that the device path prefers
// for collective coll, whatever the call's placement on each rank (the
// plan of the other placement where none of it fits): in place for
// allreduce (PyTorch's DDP reduces its gradient buckets in place), out of
// place for allgather and reducescatter (all_gather_into_tensor and
// reduce_scatter_tensor, FSDP's calls, are out of place). A call of the
// other placement copies its input first (docs/integration.md).
func devicePlace(coll collective) bool {
	return coll == collAllReduce
}

// selectEitherPlace is select's choice for req, and the placement of
// the plan chosen: where no plan of req's placement fits, the plan of
// the other placement that fits it (the call copies its input first).
// The error is the search's of req's placement.
func selectEitherPlace(sources []planset.Source, req planset.Request) (*planset.Choice, bool, error) {
	choice, err := planset.Select(sources, req)
	if err == nil || !errors.Is(err, planset.ErrNoPlan) {
		return choice, req.InPlace, err
	}
	other := req
	other.InPlace = !req.InPlace
	if c, otherErr := planset.Select(sources, other); otherErr == nil {
		return c, other.InPlace, nil
	}
	return choice, req.InPlace, err
}

// describe is the call as the log shows it.
func (c *comm) describe(k call) string {
	s := fmt.Sprintf("rank %d of %d: %s count %d %s", c.rank, c.size, k.fn, k.count, dtypeName(k.dtype))
	if k.op >= 0 {
		s += " " + k.opLabel()
	}
	if k.peer >= 0 {
		if k.coll == collSend || k.coll == collRecv {
			s += fmt.Sprintf(" peer %d", k.peer)
		} else {
			s += fmt.Sprintf(" root %d", k.peer)
		}
	}
	if name := k.coll.planName(); name != "" && elemSize(k.dtype) > 0 {
		place := "out-of-place"
		if k.inPlace(c.rank) {
			place = "in-place"
		}
		s += fmt.Sprintf(" (%s, %d bytes)", place, k.size(c.size))
	}
	switch {
	case k.deferred:
		s += " at the end of its group"
	case k.groupDepth > 0:
		s += " in a group"
	}
	return s
}
