package starlib

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"go.starlark.net/starlark"

	"github.com/mscclgo/mscclgo/ir"
)

// programFields are the attributes of a program value, in the order of the
// CollectiveProgram parameters.
var programFields = []string{
	"name", "collective", "num_ranks", "instances", "protocol", "instr_fusion", "auto_sync",
	"replication_policy", "reuse_resources", "num_threads_per_block", "use_double_scratch_buffer",
	"buffer_alignment", "min_message_size", "max_message_size",
}

var programMethods = methodTable("CollectiveProgram", map[string]builtinFn{
	"to_json": programToJSON,
})

var (
	_ starlark.HasAttrs = (*Program)(nil)
)

// String returns "<CollectiveProgram NAME>".
func (p *Program) String() string { return fmt.Sprintf("<CollectiveProgram %q>", p.IR.Name) }

// Type returns "CollectiveProgram".
func (p *Program) Type() string { return "CollectiveProgram" }

// Freeze does nothing: the program keeps recording after the module ends
// only through builtins, which check the current program.
func (p *Program) Freeze() {}

// Truth is true.
func (p *Program) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (p *Program) Hash() (uint32, error) { return noHash("CollectiveProgram") }

// Attr returns a program attribute or method.
func (p *Program) Attr(name string) (starlark.Value, error) {
	g := p.IR
	switch name {
	case "name":
		return starlark.String(g.Name), nil
	case "collective":
		return p.collective, nil
	case "num_ranks":
		return starlark.MakeInt(g.NumRanks), nil
	case "instances":
		return starlark.MakeInt(g.Instances), nil
	case "protocol":
		return starlark.String(g.Protocol), nil
	case "instr_fusion":
		return starlark.Bool(g.InstrFusion), nil
	case "auto_sync":
		return starlark.Bool(g.AutoSync), nil
	case "replication_policy":
		return replicationPolicyEnum.members[g.Policy], nil
	case "reuse_resources":
		return starlark.Bool(g.ReuseResources), nil
	case "num_threads_per_block":
		return starlark.MakeBigInt(g.NumThreadsPerBlock), nil
	case "use_double_scratch_buffer":
		return starlark.Bool(g.UseDoubleScratchBuffer), nil
	case "buffer_alignment":
		return starlark.MakeBigInt(g.BufferAlignment), nil
	case "min_message_size":
		return starlark.MakeBigInt(g.MinMessageSize), nil
	case "max_message_size":
		return starlark.MakeBigInt(g.MaxMessageSize), nil
	}
	return methodAttr(programMethods, name, p), nil
}

// AttrNames lists the attributes.
func (p *Program) AttrNames() []string { return names(programFields, programMethods) }

func programToJSON(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(fnName(b), args, kwargs, 0); err != nil {
		return nil, err
	}
	return planString(b.Receiver().(*Program), fnName(b))
}

// planString finalizes p and returns its plan without the trailing newline.
func planString(p *Program, fn string) (starlark.Value, error) {
	if p.loop != nil {
		return nil, fmt.Errorf("%s: called inside Loop.iteration", fn)
	}
	plan, err := p.Plan()
	if err != nil {
		// The error is raised at the JSON() call; keep the position of
		// the offending op in the message.
		var se *Error
		if errors.As(err, &se) && se.Pos.IsValid() {
			return nil, fmt.Errorf("%s: %s (recorded at %s)", fn, se.Msg, se.Pos)
		}
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.String(strings.TrimSuffix(string(plan), "\n")), nil
}

// jsonBuiltin implements JSON(): the current program's plan.
func jsonBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	s := stateOf(thread)
	if s == nil || s.current == nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), ErrNoProgram)
	}
	return planString(s.current, b.Name())
}

// programSpec holds the CollectiveProgram parameters.
type programSpec struct {
	name               string
	collective         starlark.Value
	numRanks           starlark.Value
	instances          starlark.Value
	protocol           starlark.Value
	instrFusion        starlark.Value
	autoSync           starlark.Value
	policy             starlark.Value
	reuseResources     starlark.Value
	threadsPerBlock    starlark.Value
	doubleScratch      starlark.Value
	bufferAlignment    starlark.Value
	minMessageSize     starlark.Value
	maxMessageSize     starlark.Value
	collectiveResolved *Collective
}

func defaultProgramSpec() programSpec {
	return programSpec{
		instances:       starlark.MakeInt(1),
		protocol:        starlark.String("Simple"),
		instrFusion:     starlark.True,
		autoSync:        starlark.True,
		policy:          replicationPolicyEnum.members[ir.Interleaved],
		reuseResources:  starlark.False,
		threadsPerBlock: starlark.MakeInt(1024),
		doubleScratch:   starlark.False,
		bufferAlignment: starlark.MakeInt(16),
		minMessageSize:  starlark.MakeInt(0),
		maxMessageSize:  starlark.MakeBigInt(maxUint64()),
	}
}

func maxUint64() *big.Int {
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(1))
}

// build validates the spec and creates the program value.
func (ps *programSpec) build(fn string) (*Program, error) {
	coll, ok := ps.collective.(*Collective)
	if !ok {
		return nil, fmt.Errorf("%s: for parameter collective: got %s, want a collective (AllGather, AllReduce, ...)", fn, ps.collective.Type())
	}
	numRanks, err := toInt(fn, "num_ranks", ps.numRanks)
	if err != nil {
		return nil, err
	}
	if numRanks < 1 {
		return nil, fmt.Errorf("%s: num_ranks must be positive, got %d", fn, numRanks)
	}
	if numRanks > coll.numRanks {
		return nil, fmt.Errorf("%s: num_ranks %d exceeds the %d ranks of %s", fn, numRanks, coll.numRanks, coll)
	}
	if coll.kind == "AllToAllV" && numRanks != coll.numRanks {
		return nil, fmt.Errorf("%s: num_ranks %d: an AllToAllV program has exactly the %d ranks of %s (every rank has one block per peer)", fn, numRanks, coll.numRanks, coll)
	}
	instances, err := toInt(fn, "instances", ps.instances)
	if err != nil {
		return nil, err
	}
	if instances < 1 {
		return nil, fmt.Errorf("%s: instances must be at least 1, got %d", fn, instances)
	}
	if instances > MaxInstances {
		return nil, fmt.Errorf("%s: instances %d exceeds the limit of %d", fn, instances, MaxInstances)
	}
	proto, ok := ps.protocol.(starlark.String)
	if !ok || (proto != "Simple" && proto != "LL") {
		return nil, fmt.Errorf("%s: protocol must be \"Simple\" or \"LL\", got %s", fn, ps.protocol)
	}
	in, out := coll.chunks()
	g := ir.NewProgram(numRanks, in, out)
	g.Name = ps.name
	g.Collective = coll.name
	g.Protocol = string(proto)
	g.Inplace = coll.inplace
	g.Instances = instances
	if g.InstrFusion, err = toBool(fn, "instr_fusion", ps.instrFusion); err != nil {
		return nil, err
	}
	if g.AutoSync, err = toBool(fn, "auto_sync", ps.autoSync); err != nil {
		return nil, err
	}
	pol, err := asEnum(fn, "replication_policy", ps.policy, replicationPolicyEnum)
	if err != nil {
		return nil, err
	}
	g.Policy = ir.ReplicationPolicy(pol)
	if g.ReuseResources, err = toBool(fn, "reuse_resources", ps.reuseResources); err != nil {
		return nil, err
	}
	if g.UseDoubleScratchBuffer, err = toBool(fn, "use_double_scratch_buffer", ps.doubleScratch); err != nil {
		return nil, err
	}
	if g.NumThreadsPerBlock, err = toBig(fn, "num_threads_per_block", ps.threadsPerBlock); err != nil {
		return nil, err
	}
	if g.BufferAlignment, err = toBig(fn, "buffer_alignment", ps.bufferAlignment); err != nil {
		return nil, err
	}
	if g.MinMessageSize, err = toBig(fn, "min_message_size", ps.minMessageSize); err != nil {
		return nil, err
	}
	if g.MaxMessageSize, err = toBig(fn, "max_message_size", ps.maxMessageSize); err != nil {
		return nil, err
	}
	if coll.kind == "AllToAllV" {
		// The marker of a variable-size plan (docs/language.md §5.1): no
		// message size is in range, so MSCCL++ refuses every execution of
		// it instead of misreading its chunks as equal slices.
		g.MinMessageSize, g.MaxMessageSize = maxUint64(), new(big.Int)
	}
	return &Program{IR: g, collective: coll}, nil
}

// start makes p the current program of the evaluation.
func start(thread *starlark.Thread, fn string, p *Program) error {
	s := stateOf(thread)
	if s == nil {
		return fmt.Errorf("%s: not running under mscclgo", fn)
	}
	if s.current != nil && s.current.loop != nil {
		return fmt.Errorf("%s: cannot create a program inside Loop.iteration", fn)
	}
	p.IR.Pos = callerPos(thread)
	p.st = s
	s.programs = append(s.programs, p)
	s.current = p
	return nil
}

// programConstructor is the CollectiveProgram callable, which also has the
// attribute from_spec.
type programConstructor struct{}

var (
	_ starlark.Callable = programConstructor{}
	_ starlark.HasAttrs = programConstructor{}
)

func (programConstructor) String() string        { return "<built-in function CollectiveProgram>" }
func (programConstructor) Type() string          { return "builtin_function_or_method" }
func (programConstructor) Freeze()               {}
func (programConstructor) Truth() starlark.Bool  { return starlark.True }
func (programConstructor) Hash() (uint32, error) { return starlark.String("CollectiveProgram").Hash() }
func (programConstructor) Name() string          { return "CollectiveProgram" }
func (programConstructor) AttrNames() []string   { return []string{"from_spec"} }

// Attr returns from_spec.
func (programConstructor) Attr(name string) (starlark.Value, error) {
	if name == "from_spec" {
		return starlark.NewBuiltin("CollectiveProgram.from_spec", guard("CollectiveProgram.from_spec", programFromSpec)), nil
	}
	return nil, nil
}

// CallInternal implements CollectiveProgram(name, collective, num_ranks, ...).
func (programConstructor) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	const fn = "CollectiveProgram"
	ps := defaultProgramSpec()
	if err := starlark.UnpackArgs(fn, args, kwargs,
		"name", &ps.name, "collective", &ps.collective, "num_ranks", &ps.numRanks,
		"instances?", &ps.instances, "protocol?", &ps.protocol, "instr_fusion?", &ps.instrFusion,
		"auto_sync?", &ps.autoSync, "replication_policy?", &ps.policy, "reuse_resources?", &ps.reuseResources,
		"num_threads_per_block?", &ps.threadsPerBlock, "use_double_scratch_buffer?", &ps.doubleScratch,
		"buffer_alignment?", &ps.bufferAlignment, "min_message_size?", &ps.minMessageSize,
		"max_message_size?", &ps.maxMessageSize); err != nil {
		return nil, err
	}
	p, err := ps.build(fn)
	if err != nil {
		return nil, err
	}
	if err := start(thread, fn, p); err != nil {
		return nil, err
	}
	return p, nil
}

func programFromSpec(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var spec *AlgoSpec
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "spec", &spec); err != nil {
		return nil, err
	}
	f := spec.field
	name, ok := f("name").(starlark.String)
	if !ok {
		return nil, fmt.Errorf("%s: spec.name: got %s, want string", b.Name(), f("name").Type())
	}
	ps := programSpec{
		name: string(name), collective: f("collective"), numRanks: f("world_size"),
		instances: f("instances"), protocol: f("protocol"), instrFusion: f("instr_fusion"),
		autoSync: f("auto_sync"), policy: f("replication_policy"), reuseResources: f("reuse_resources"),
		threadsPerBlock: f("num_threads_per_block"), doubleScratch: f("use_double_scratch_buffer"),
		bufferAlignment: f("buffer_alignment"), minMessageSize: f("min_message_size"),
		maxMessageSize: f("max_message_size"),
	}
	p, err := ps.build(b.Name())
	if err != nil {
		return nil, err
	}
	if p.spec, err = spec.info(b.Name()); err != nil {
		return nil, err
	}
	if err := start(thread, b.Name(), p); err != nil {
		return nil, err
	}
	return p, nil
}

// SpecInfo is what a program created by CollectiveProgram.from_spec records
// of its AlgoSpec beyond the plan itself: the shape and the tags a plan
// selector needs.
type SpecInfo struct {
	RanksPerNode int
	WorldSize    int
	InPlace      bool
	Tags         map[string]string
}

// Spec returns the AlgoSpec facts of a program created with
// CollectiveProgram.from_spec, or nil.
func (p *Program) Spec() *SpecInfo { return p.spec }

// info extracts the SpecInfo; tag values must be strings, ints or bools.
func (s *AlgoSpec) info(fn string) (*SpecInfo, error) {
	rpn, err := toInt(fn, "spec.nranks_per_node", s.field("nranks_per_node"))
	if err != nil {
		return nil, err
	}
	ws, err := toInt(fn, "spec.world_size", s.field("world_size"))
	if err != nil {
		return nil, err
	}
	inPlace, err := toBool(fn, "spec.in_place", s.field("in_place"))
	if err != nil {
		return nil, err
	}
	info := &SpecInfo{RanksPerNode: rpn, WorldSize: ws, InPlace: inPlace, Tags: map[string]string{}}
	for _, kv := range s.field("tags").(*starlark.Dict).Items() {
		k, ok := starlark.AsString(kv[0])
		if !ok {
			return nil, fmt.Errorf("%s: spec.tags keys must be strings, got %s", fn, kv[0].Type())
		}
		switch v := kv[1].(type) {
		case starlark.String:
			info.Tags[k] = string(v)
		case starlark.Int, starlark.Bool:
			info.Tags[k] = v.String()
		default:
			return nil, fmt.Errorf("%s: spec.tags[%q] must be a string, int or bool, got %s", fn, k, v.Type())
		}
	}
	return info, nil
}

// algoSpecFields are the AlgoSpec fields in positional order.
var algoSpecFields = []string{
	"name", "collective", "nranks_per_node", "world_size", "in_place", "instances", "protocol",
	"instr_fusion", "auto_sync", "replication_policy", "reuse_resources", "num_threads_per_block",
	"use_double_scratch_buffer", "buffer_alignment", "min_message_size", "max_message_size", "tags",
}

// AlgoSpec is the immutable description of an algorithm instance.
type AlgoSpec struct {
	values []starlark.Value // indexed like algoSpecFields
}

var _ starlark.HasAttrs = (*AlgoSpec)(nil)

func (s *AlgoSpec) field(name string) starlark.Value {
	for i, f := range algoSpecFields {
		if f == name {
			return s.values[i]
		}
	}
	return starlark.None
}

// String returns AlgoSpec(name=..., ...).
func (s *AlgoSpec) String() string {
	var b strings.Builder
	b.WriteString("AlgoSpec(")
	for i, f := range algoSpecFields {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", f, s.values[i])
	}
	b.WriteString(")")
	return b.String()
}

// Type returns "AlgoSpec".
func (s *AlgoSpec) Type() string { return "AlgoSpec" }

// Freeze freezes the field values.
func (s *AlgoSpec) Freeze() {
	for _, v := range s.values {
		v.Freeze()
	}
}

// Truth is true.
func (s *AlgoSpec) Truth() starlark.Bool { return starlark.True }

// Hash fails (tags is a dict).
func (s *AlgoSpec) Hash() (uint32, error) { return noHash("AlgoSpec") }

// Attr returns a field.
func (s *AlgoSpec) Attr(name string) (starlark.Value, error) {
	for i, f := range algoSpecFields {
		if f == name {
			return s.values[i], nil
		}
	}
	return nil, nil
}

// AttrNames lists the fields.
func (s *AlgoSpec) AttrNames() []string { return names(algoSpecFields, nil) }

func algoSpecBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	d := defaultProgramSpec()
	vals := make([]starlark.Value, len(algoSpecFields))
	defaults := map[string]starlark.Value{
		"instr_fusion": d.instrFusion, "auto_sync": d.autoSync, "replication_policy": d.policy,
		"reuse_resources": d.reuseResources, "num_threads_per_block": d.threadsPerBlock,
		"use_double_scratch_buffer": d.doubleScratch, "buffer_alignment": d.bufferAlignment,
		"min_message_size": d.minMessageSize, "max_message_size": d.maxMessageSize,
	}
	pairs := make([]any, 0, 2*len(algoSpecFields))
	for i, f := range algoSpecFields {
		name := f
		if i >= 7 {
			name += "?"
		}
		vals[i] = defaults[f]
		pairs = append(pairs, name, &vals[i])
	}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, pairs...); err != nil {
		return nil, err
	}
	tags := len(algoSpecFields) - 1
	if vals[tags] == nil {
		vals[tags] = starlark.NewDict(0)
	} else if _, ok := vals[tags].(*starlark.Dict); !ok {
		return nil, fmt.Errorf("%s: for parameter tags: got %s, want dict", b.Name(), vals[tags].Type())
	}
	if _, ok := vals[1].(*Collective); !ok {
		return nil, fmt.Errorf("%s: for parameter collective: got %s, want a collective", b.Name(), vals[1].Type())
	}
	return &AlgoSpec{values: vals}, nil
}
