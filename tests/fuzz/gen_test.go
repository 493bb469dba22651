// gen_test.go holds the random-program generator of FuzzEval: it reads the
// fuzz input as a stream of choices and writes a mostly well-formed .star
// script from them, every DSL builtin in reach (collectives, programs and
// their options, ranks, buffers and chunks, the three channel kinds,
// semaphores, barriers, thread-block groups, pipelined loops), mixed with
// plain Starlark (functions, loops, comprehensions, big integers,
// strings) and, rarely, with calls the builtins must reject.

package fuzz

import (
	"fmt"
	"strings"
)

// choices reads fuzz input as decisions. Past the end of the input every
// choice is 0, which the generators read as "the common case, and stop".
type choices struct {
	data []byte
	pos  int
}

// done reports whether the input is used up.
func (c *choices) done() bool { return c.pos >= len(c.data) }

func (c *choices) byte() byte {
	if c.done() {
		return 0
	}
	b := c.data[c.pos]
	c.pos++
	return b
}

// intn returns a choice in [0, n).
func (c *choices) intn(n int) int {
	switch {
	case n <= 1:
		return 0
	case n <= 256:
		return int(c.byte()) % n
	}
	return (int(c.byte())<<8 | int(c.byte())) % n
}

// chance is true num times in den; it is false once the input is used up,
// so that rare branches stay rare at the end of short inputs.
func (c *choices) chance(num, den int) bool { return c.intn(den) >= den-num }

// coin is true half the time (false past the end).
func (c *choices) coin() bool { return c.chance(1, 2) }

// pick returns an index drawn with the given weights.
func (c *choices) pick(weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := c.intn(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return 0
}

// script accumulates the lines of a generated program.
type script struct {
	b      strings.Builder
	indent int
	lines  int
	fresh  int
}

func (s *script) line(format string, args ...any) {
	s.b.WriteString(strings.Repeat("    ", s.indent))
	fmt.Fprintf(&s.b, format, args...)
	s.b.WriteByte('\n')
	s.lines++
}

// name returns a fresh identifier starting with prefix.
func (s *script) name(prefix string) string {
	s.fresh++
	return fmt.Sprintf("%s%d", prefix, s.fresh)
}

func (s *script) String() string { return s.b.String() }

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// jsonMarker starts the line a generated script prints JSON() on; the
// text after it must be the current program's plan.
const jsonMarker = "@@fuzz-json@@"

// The generator's model of what the script has created in the current
// program, so that most calls it writes are valid.
type (
	bufRef struct {
		expr   string
		length int
		kind   byte // 'i', 'o' or 's'
		rank   int
	}
	// span is the chunk chunk() last wrote: its buffer and range.
	span struct {
		buf         bufRef
		start, size int
	}
	chanInfo struct {
		name     string
		port     bool
		src, dst int
	}
	switchInfo struct {
		name  string
		ranks []int
		buf   byte // 'i', 'o' or 's'
	}
	semInfo struct {
		name string
		rank int
	}
	groupInfo struct {
		name string
		tbs  []int
	}
)

// randGen writes a random program.
type randGen struct {
	c *choices
	s *script

	programs      int
	n             int // ranks of the current program
	inLen, outLen int
	tbs           int // thread-block ids are drawn from [0, tbs)
	scratch       [][]bufRef
	scratchLen    []int
	chans         []chanInfo
	switches      []switchInfo
	sems          []semInfo
	groups        []groupInfo
	ll            bool // the current program's protocol is LL
	inplace       bool // the program's input and output alias (in the executor's layout)
	last          span // the chunk chunk() wrote last
	// fusionUnsafe records a reduction that fusion may merge with a
	// neighbour in a way that changes its result (rule F4 of
	// passes/fuse.go): its destination is not its first source, or a
	// source overlaps its destination.
	fusionUnsafe bool
	fusion       bool // the current program fuses instructions
	inLoop       bool // inside a Loop.iteration body
	local        bool // inside a function or conditional: create no names the rest uses
	// defines are the -D values the script's param() calls get.
	defines map[string]string
	// dirty records that the script holds a construct that check may
	// rightly reject (or evaluation refuse): a malformed call, an
	// out-of-range header value, a packet op under the Simple protocol, an
	// unfused switch reduce.
	dirty bool
}

// randProgram is a generated random program.
type randProgram struct {
	text string
	// clean: see randGen.dirty; fusionSafe: see randGen.fusionUnsafe.
	clean, fusionSafe bool
	defines           map[string]string // the -D values to evaluate it with
}

// genRandom returns a random program drawn from c.
func genRandom(c *choices) randProgram {
	g := &randGen{c: c, s: &script{}, defines: map[string]string{}}
	g.s.line("# FuzzEval: a random program")
	g.header()
	n := 1 + c.intn(40)
	for i := 0; i < n; i++ {
		g.statement(0)
		if c.done() {
			break
		}
	}
	if c.chance(1, 12) {
		g.header()
		for i := c.intn(12); i >= 0 && !c.done(); i-- {
			g.statement(0)
		}
	}
	if c.chance(1, 10) {
		g.s.line("print(%q + JSON())", jsonMarker)
	}
	return randProgram{text: g.s.String(), clean: !g.dirty, fusionSafe: !g.fusionUnsafe, defines: g.defines}
}

// header starts a program and binds R, I and O to its ranks and their
// input and output buffers.
func (g *randGen) header() {
	c, s := g.c, g.s
	g.programs++
	collectives := []string{"AllGather", "AllReduce", "ReduceScatter", "AllToAll", "SendRecv", "TestCollective"}
	kind := collectives[c.intn(len(collectives))]
	n := 1 + c.intn(8)
	if c.chance(1, 25) {
		n = 9 + c.intn(8)
	}
	f := 1 + c.intn(4)
	if c.chance(1, 40) {
		f = 0
		g.dirty = true
	}
	inplace := c.coin()
	g.inplace = inplace && kind != "TestCollective" && kind != "SendRecv"
	var coll string
	switch kind {
	case "TestCollective":
		g.inLen, g.outLen = c.intn(9), c.intn(9)
		coll = fmt.Sprintf("TestCollective(%d, %d, %d)", n, g.inLen, g.outLen)
	default:
		coll = fmt.Sprintf("%s(%d, %d, %s)", kind, n, f, pyBool(inplace))
		switch kind {
		case "AllGather":
			g.inLen, g.outLen = f, n*f
		case "ReduceScatter":
			g.inLen, g.outLen = n*f, f
		case "SendRecv":
			g.inLen, g.outLen = f, f
		default:
			g.inLen, g.outLen = n*f, n*f
		}
	}
	ranks := n
	if c.chance(1, 20) {
		ranks = 1 + c.intn(n)
	}
	instances := 1 + c.intn(3)
	if c.chance(1, 40) {
		// Replication at scale, and past the limit (an error).
		instances = []int{16, 64, 200, 4097}[c.intn(4)]
		g.dirty = g.dirty || instances > 4096
	}
	kw := []string{fmt.Sprintf("instances = %d", instances)}
	g.ll = c.chance(1, 3)
	if g.ll {
		kw = append(kw, `protocol = "LL"`)
	} else {
		kw = append(kw, `protocol = "Simple"`)
	}
	g.fusion = !c.chance(1, 4)
	kw = append(kw, "instr_fusion = "+pyBool(g.fusion), "auto_sync = "+pyBool(!c.chance(1, 4)))
	if c.chance(1, 60) {
		kw = append(kw, "replication_policy = ReplicationPolicy.none")
		g.dirty = true
	}
	if c.chance(1, 40) {
		// 64 MiB of scratch per rank in every session: rare, for speed.
		kw = append(kw, "reuse_resources = True")
	}
	if c.chance(1, 6) {
		kw = append(kw, "use_double_scratch_buffer = True")
	}
	if c.chance(1, 15) {
		a := []int{32, 64, 8, 0, 1, 48}[c.intn(6)]
		kw = append(kw, fmt.Sprintf("buffer_alignment = %d", a))
		g.dirty = g.dirty || a != 32 && a != 64
	}
	if c.chance(1, 15) {
		lo := []int{0, 1 << 10, 1 << 12, 3000}[c.intn(4)]
		k := c.intn(4)
		hi := []string{"1 << 14", "1 << 20", "(1 << 64) - 1", "1 << 9"}[k]
		kw = append(kw, fmt.Sprintf("min_message_size = %d", lo), "max_message_size = "+hi)
		g.dirty = g.dirty || k == 3 && lo > 1<<9
	}
	if c.chance(1, 20) {
		k := c.intn(4)
		kw = append(kw, fmt.Sprintf("num_threads_per_block = %d", []int{512, 0, 2048, 1}[k]))
		g.dirty = g.dirty || k != 0
	}
	name := fmt.Sprintf("fuzz%d", g.programs)
	if c.chance(1, 10) {
		// Names the plan writer must escape as Python's json.dumps does.
		name = []string{"q\"uote\\back", "\u00fcn\u00efcode", "\U0001F600 astral", "tab\there\x01", "", "fuzz/slash"}[c.intn(6)]
	}
	if c.chance(1, 5) {
		// The AlgoSpec route; the spec has all fields but the program's
		// keyword names match.
		s.line("spec = AlgoSpec(name = %q, collective = %s, nranks_per_node = %d, world_size = %d, in_place = %s, %s)",
			name, coll, n, ranks, pyBool(inplace), strings.Join(kw, ", "))
		s.line("P = CollectiveProgram.from_spec(spec)")
	} else {
		s.line("P = CollectiveProgram(%q, %s, %d, %s)", name, coll, ranks, strings.Join(kw, ", "))
	}
	s.line("R = [Rank(r) for r in range(%d)]", ranks)
	s.line("I = [r.get_input_buffer() for r in R]")
	s.line("O = [r.get_output_buffer() for r in R]")
	g.n = ranks
	g.tbs = 1 + c.intn(4)
	g.scratch = make([][]bufRef, ranks)
	g.scratchLen = make([]int, ranks)
	g.chans, g.switches, g.sems, g.groups = nil, nil, nil, nil
	for i := c.intn(3); i > 0; i-- {
		g.newChannelPair(c.chance(1, 3))
	}
}

// rank returns a rank of the program (rarely one out of range).
func (g *randGen) rank() int {
	if g.c.chance(1, 400) {
		g.dirty = true
		return g.n
	}
	return g.c.intn(g.n)
}

// rankExpr writes rank r: R[r], or Rank(r) for one out of range.
func (g *randGen) rankExpr(r int) string {
	if r >= g.n || g.c.chance(1, 10) {
		return fmt.Sprintf("Rank(%d)", r)
	}
	return fmt.Sprintf("R[%d]", r)
}

// bufs returns the buffers of rank r of the kinds listed ('i', 'o', 's').
func (g *randGen) bufs(r int, kinds string) []bufRef {
	if r < 0 || r >= g.n {
		return []bufRef{{fmt.Sprintf("Rank(%d).get_input_buffer()", r), 1, 'i', r}}
	}
	var out []bufRef
	if strings.IndexByte(kinds, 'i') >= 0 {
		out = append(out, bufRef{fmt.Sprintf("I[%d]", r), g.inLen, 'i', r})
	}
	if strings.IndexByte(kinds, 'o') >= 0 {
		out = append(out, bufRef{fmt.Sprintf("O[%d]", r), g.outLen, 'o', r})
	}
	if strings.IndexByte(kinds, 's') >= 0 {
		out = append(out, g.scratch[r]...)
	}
	return out
}

// buf picks a buffer of rank r among kinds, creating a scratch buffer
// when only scratch is wanted and there is none.
func (g *randGen) buf(r int, kinds string) bufRef {
	bs := g.bufs(r, kinds)
	if len(bs) == 0 {
		return g.newScratch(r)
	}
	return bs[g.c.intn(len(bs))]
}

// bufAtLeast picks a buffer of rank r among kinds that holds n chunks,
// creating a scratch buffer if there is none.
func (g *randGen) bufAtLeast(r int, kinds string, n int) bufRef {
	var fit []bufRef
	for _, b := range g.bufs(r, kinds) {
		if b.length >= n {
			fit = append(fit, b)
		}
	}
	if len(fit) == 0 {
		if g.local || r < 0 || r >= g.n {
			return bufRef{fmt.Sprintf("Buffer(%d, %d)", r, n), n, 's', r}
		}
		name := g.s.name("S")
		g.s.line("%s = Buffer(%d, %d)", name, r, n)
		b := bufRef{name, n, 's', r}
		g.scratch[r] = append(g.scratch[r], b)
		g.scratchLen[r] += n
		return b
	}
	return fit[g.c.intn(len(fit))]
}

// size draws a chunk size that fits a buffer of length max.
func (g *randGen) size(max int) int {
	if max <= 0 {
		return 0
	}
	if g.c.chance(1, 60) {
		return 0
	}
	return 1 + g.c.intn(min(max, 3))
}

// chunk writes a slice of b of size chunks (rarely a malformed one).
func (g *randGen) chunk(b bufRef, size int) string {
	c := g.c
	size = min(size, b.length)
	start := c.intn(b.length - size + 1)
	g.last = span{b, start, size}
	if c.chance(1, 400) {
		g.dirty = true
		switch c.intn(5) {
		case 0:
			return fmt.Sprintf("%s[%d:%d]", b.expr, b.length, b.length+size+1)
		case 1:
			return fmt.Sprintf("%s[%d:%d]", b.expr, start+size+1, start)
		case 2:
			return fmt.Sprintf("%s[%d]", b.expr, start)
		case 3:
			return fmt.Sprintf("%s[-1:%d]", b.expr, start)
		default:
			return fmt.Sprintf("%s[%d:%d:2]", b.expr, start, start+size)
		}
	}
	if start == 0 && size == b.length && c.coin() {
		return b.expr + "[:]"
	}
	return fmt.Sprintf("%s[%d:%d]", b.expr, start, start+size)
}

// pairChunks writes two chunks of equal size on (ra, kindsA) and (rb,
// kindsB).
func (g *randGen) pairChunks(ra int, ka string, rb int, kb string) (string, string) {
	a, b := g.buf(ra, ka), g.buf(rb, kb)
	n := g.size(min(a.length, b.length))
	if g.c.chance(1, 400) {
		g.dirty = true
		return g.chunk(a, n), g.chunk(b, n+1)
	}
	return g.chunk(a, n), g.chunk(b, n)
}

// tb writes the thread-block argument: tb, tb_group, both, or (rarely) a
// bad one or none.
func (g *randGen) tb(groupOK bool) string {
	c := g.c
	if groupOK && len(g.groups) > 0 && c.chance(1, 6) {
		gr := g.groups[c.intn(len(g.groups))]
		if len(gr.tbs) > 0 && c.chance(1, 4) {
			return fmt.Sprintf("tb = %d, tb_group = %s", gr.tbs[c.intn(len(gr.tbs))], gr.name)
		}
		return "tb_group = " + gr.name
	}
	if c.chance(1, 400) {
		g.dirty = true
		return []string{"tb = -1", "tb = 65537", "tb = None", "", `tb = "0"`}[c.intn(5)]
	}
	t := c.intn(g.tbs)
	if c.chance(1, 10) {
		return fmt.Sprintf("tb = %d %% %d", t+g.tbs*c.intn(3), g.tbs)
	}
	return fmt.Sprintf("tb = %d", t)
}

// call writes a call statement, leaving out empty arguments.
func (g *randGen) call(fn string, args ...string) {
	var keep []string
	for _, a := range args {
		if a != "" {
			keep = append(keep, a)
		}
	}
	g.s.line("%s(%s)", fn, strings.Join(keep, ", "))
}

func (g *randGen) syncType() string {
	c := g.c
	if c.chance(1, 8) {
		return "SyncType.before | SyncType.after"
	}
	return "SyncType." + []string{"both", "before", "after", "none"}[c.intn(4)]
}

func (g *randGen) reduceOp() string {
	return "ReduceOperationType." + []string{"sum", "min", "max"}[g.c.intn(3)]
}

// newScratch allocates a scratch buffer on rank r.
func (g *randGen) newScratch(r int) bufRef {
	size := 1 + g.c.intn(4)
	if g.c.chance(1, 40) {
		size = []int{0, -1}[g.c.intn(2)]
		g.dirty = g.dirty || size < 0
	}
	if g.local || r < 0 || r >= g.n {
		// A local name would vanish; write an expression instead.
		return bufRef{fmt.Sprintf("Buffer(%d, %d)", r, max(size, 0)), max(size, 0), 's', r}
	}
	name := g.s.name("S")
	g.s.line("%s = Buffer(%d, %d)", name, r, size)
	if size < 0 {
		size = 0
	}
	b := bufRef{name, size, 's', r}
	g.scratch[r] = append(g.scratch[r], b)
	g.scratchLen[r] += size
	return b
}

// newChannel declares a channel src -> dst.
func (g *randGen) newChannel(port bool, src, dst int) chanInfo {
	kind := "MemoryChannel"
	if port {
		kind = "PortChannel"
	}
	ch := chanInfo{port: port, src: src, dst: dst}
	if g.local {
		ch.name = fmt.Sprintf("%s(%d, %d)", kind, dst, src)
		return ch
	}
	ch.name = g.s.name(strings.ToLower(kind[:1]) + "c")
	g.s.line("%s = %s(%d, %d)", ch.name, kind, dst, src)
	g.chans = append(g.chans, ch)
	return ch
}

// newChannelPair declares a channel and its way back.
func (g *randGen) newChannelPair(port bool) {
	a, b := g.c.intn(g.n), g.c.intn(g.n)
	if a == b && g.n > 1 && !g.c.chance(1, 10) {
		b = (a + 1) % g.n
	}
	g.newChannel(port, a, b)
	if a != b || g.c.coin() {
		g.newChannel(port, b, a)
	}
}

// channel returns a channel of the kind, declaring one if needed.
func (g *randGen) channel(port bool) chanInfo {
	var have []chanInfo
	for _, ch := range g.chans {
		if ch.port == port {
			have = append(have, ch)
		}
	}
	if len(have) == 0 || g.c.chance(1, 12) {
		a, b := g.c.intn(g.n), g.c.intn(g.n)
		if a == b && g.n > 1 {
			b = (a + 1) % g.n
		}
		return g.newChannel(port, a, b)
	}
	return have[g.c.intn(len(have))]
}

// back returns a channel of ch's kind from ch.dst to ch.src, declaring
// one if needed.
func (g *randGen) back(ch chanInfo) chanInfo {
	var have []chanInfo
	for _, b := range g.chans {
		if b.port == ch.port && b.src == ch.dst && b.dst == ch.src {
			have = append(have, b)
		}
	}
	if len(have) == 0 {
		return g.newChannel(ch.port, ch.dst, ch.src)
	}
	return have[g.c.intn(len(have))]
}

// statement writes one statement at nesting depth.
func (g *randGen) statement(depth int) {
	c := g.c
	const (
		kCopy = iota
		kPut
		kSync
		kReduce
		kGet
		kChanReduce
		kPackets
		kPort
		kChannel
		kScratch
		kSem
		kBarrier
		kSwitch
		kLoop
		kGroup
		kNoise
		kWrap
		kLook
		kBad
	)
	k := c.pick(8, 7, 7, 4, 3, 3, 4, 4, 3, 3, 2, 2, 2, 2, 1, 3, 2, 2, 1)
	if (k == kLoop && (g.inLoop || depth > 0)) || (k == kWrap && depth > 1) {
		k = kCopy
	}
	if g.local && (k == kChannel || k == kScratch || k == kGroup || k == kSwitch) {
		k = kPut
	}
	if k == kPackets && !g.ll && !c.chance(1, 4) {
		// Packet ops belong to LL programs: under Simple, their scratch
		// operands take twice the space the DSL gives them.
		k = kPut
	}
	switch k {
	case kCopy:
		g.copyOp()
	case kPut:
		ch := g.channel(false)
		d, s := g.pairChunks(ch.dst, "ios", ch.src, "ios")
		g.call(ch.name+".put", d, s, g.tb(true))
	case kSync:
		g.syncPair()
	case kReduce:
		g.reduceOp2()
	case kGet:
		ch := g.channel(false)
		d, s := g.pairChunks(ch.src, "ios", ch.dst, "ios")
		g.call(ch.name+".get", d, s, g.tb(true))
	case kChanReduce:
		ch := g.channel(false)
		local := g.buf(ch.src, "ios")
		n := g.size(local.length)
		var remotes []string
		var spans []span
		for i := c.intn(3); i > 0; i-- {
			remotes = append(remotes, g.chunk(g.bufAtLeast(ch.dst, "ios", n), n))
			spans = append(spans, g.last)
		}
		localChunk := g.chunk(local, n)
		first, dstSpan := g.last, g.last
		dst := ""
		if c.coin() {
			dst = "local_dst_chunk = " + g.chunk(g.bufAtLeast(ch.src, "ios", n), n)
			dstSpan = g.last
		}
		g.noteReduce(first, dstSpan, spans)
		op := ""
		if c.chance(1, 4) {
			op = "reduce_op = " + g.reduceOp()
		}
		g.call(ch.name+".reduce", localChunk, "["+strings.Join(remotes, ", ")+"]", g.tb(true), dst, op)
	case kPackets:
		g.dirty = g.dirty || !g.ll
		ch := g.channel(c.chance(1, 4))
		if c.coin() {
			d, s := g.pairChunks(ch.dst, "s", ch.src, "ios")
			g.call(ch.name+".put_packets", d, s, g.tb(!ch.port))
		} else {
			d, s := g.pairChunks(ch.dst, "s", ch.src, "s")
			g.call(ch.name+".read_put_packets", d, s, g.tb(true))
		}
	case kPort:
		g.portOp()
	case kChannel:
		g.newChannelPair(c.chance(1, 3))
	case kScratch:
		g.newScratch(g.c.intn(g.n))
	case kSem:
		g.semOps()
	case kBarrier:
		r := g.rank()
		n := 1 + c.intn(g.tbs)
		perm := g.perm(g.tbs)[:n]
		if c.chance(1, 40) {
			perm = append(perm, perm[0])
			g.dirty = true
		}
		g.s.line("%s.barrier(%s)", g.rankExpr(r), intList(perm))
	case kSwitch:
		g.switchOps()
	case kLoop:
		g.loop()
	case kGroup:
		n := c.intn(g.tbs + 1)
		tbs := g.perm(g.tbs)[:n]
		name := g.s.name("G")
		g.s.line("%s = ThreadBlockGroup(%s)", name, intList(tbs))
		g.groups = append(g.groups, groupInfo{name, tbs})
	case kNoise:
		g.noise()
	case kWrap:
		g.wrap(depth)
	case kLook:
		g.look()
	case kBad:
		g.bad()
	}
}

// perm returns a permutation of [0, n).
func (g *randGen) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := g.c.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (g *randGen) copyOp() {
	c := g.c
	r := g.rank()
	rk := g.rankExpr(r)
	k := 0
	if g.ll {
		k = c.pick(6, 2, 2)
	} else {
		k = c.pick(24, 1, 1)
	}
	g.dirty = g.dirty || k > 0 && !g.ll
	switch k {
	case 0:
		d, s := g.pairChunks(r, "ios", r, "ios")
		g.call(rk+".copy", d, s, g.tb(true))
	case 1:
		d, s := g.pairChunks(r, "s", r, "ios")
		g.call(rk+".copy_packets", d, s, g.tb(true))
	default:
		d, s := g.pairChunks(r, "ios", r, "s")
		g.call(rk+".unpack_packets", d, s, g.tb(true))
	}
}

// reduceOp2 writes a Rank.reduce.
func (g *randGen) reduceOp2() {
	c := g.c
	r := g.rank()
	src := g.buf(r, "ios")
	n := g.size(src.length)
	packet := c.chance(1, 4)
	if !g.ll {
		packet = c.chance(1, 16)
		g.dirty = g.dirty || packet
	}
	kinds := "ios"
	if packet {
		kinds = "s"
	}
	var others []string
	var spans []span
	for i := 1 + c.intn(3); i > 0; i-- {
		others = append(others, g.chunk(g.bufAtLeast(r, kinds, n), n))
		spans = append(spans, g.last)
	}
	if c.chance(1, 60) {
		others = nil
		g.dirty = true
	}
	args := []string{g.chunk(src, n), "[" + strings.Join(others, ", ") + "]", g.tb(true)}
	first, dst := g.last, g.last
	if c.coin() {
		args = append(args, "dst_chunk = "+g.chunk(g.bufAtLeast(r, "ios", n), n))
		dst = g.last
	}
	g.noteReduce(first, dst, spans)
	if c.chance(1, 4) {
		args = append(args, "reduce_op = "+g.reduceOp())
	}
	if packet {
		args = append(args, "packet = True")
	}
	g.call(g.rankExpr(r)+".reduce", args...)
}

// noteReduce records whether a reduction of first and others into dst is
// one fusion may merge with a neighbour unsoundly (see fusionUnsafe).
func (g *randGen) noteReduce(first, dst span, others []span) {
	if first != dst {
		g.fusionUnsafe = true
	}
	for _, o := range others {
		if g.overlap(o, dst) {
			g.fusionUnsafe = true
		}
	}
}

// overlap reports whether two chunks may share bytes: the same range of
// one buffer, or an input and an output of a rank whose buffers alias.
func (g *randGen) overlap(a, b span) bool {
	if a.size == 0 || b.size == 0 || a.buf.rank != b.buf.rank {
		return false
	}
	if a.buf.expr != b.buf.expr {
		return g.inplace && a.buf.kind != 's' && b.buf.kind != 's' && a.buf.kind != b.buf.kind
	}
	return a.start < b.start+b.size && b.start < a.start+a.size
}

// syncPair writes a signal and the wait that matches it (rarely only one
// of them).
func (g *randGen) syncPair() {
	c := g.c
	ch := g.channel(c.chance(1, 3))
	back := g.back(ch)
	relaxed := ""
	if !ch.port && c.chance(1, 4) {
		relaxed = "relaxed = True"
	}
	ds := func() string {
		if c.coin() {
			return ""
		}
		return "data_sync = " + g.syncType()
	}
	which := c.pick(60, 1, 1)
	g.dirty = g.dirty || which != 0
	if which != 2 {
		g.call(ch.name+".signal", g.tb(false), ds(), relaxed)
	}
	if which != 1 {
		g.call(back.name+".wait", g.tb(false), ds(), relaxed)
	}
}

// portOp writes a port-channel op; a put with signal gets its wait.
func (g *randGen) portOp() {
	c := g.c
	ch := g.channel(true)
	switch c.pick(3, 3, 2, 2) {
	case 0:
		d, s := g.pairChunks(ch.dst, "ios", ch.src, "ios")
		g.call(ch.name+".put", d, s, g.tb(false))
	case 1, 2:
		fn := ".put_with_signal"
		if c.coin() {
			fn = ".put_with_signal_and_flush"
		}
		d, s := g.pairChunks(ch.dst, "ios", ch.src, "ios")
		g.call(ch.name+fn, d, s, g.tb(false))
		if !c.chance(1, 60) {
			g.call(g.back(ch).name+".wait", g.tb(false))
		} else {
			g.dirty = true
		}
	default:
		g.call(ch.name+".flush", g.tb(false), "data_sync = "+g.syncType())
	}
}

// semOps writes a release and the acquire that follows it.
func (g *randGen) semOps() {
	c := g.c
	var sem semInfo
	if len(g.sems) == 0 || g.local || c.chance(1, 4) {
		r := g.rank()
		init := []int{0, 0, 0, 1, -1, 1 << 33}[c.pick(20, 20, 20, 10, 5, 1)]
		g.dirty = g.dirty || init > 1<<31
		if g.local {
			sem = semInfo{fmt.Sprintf("Semaphore(%d, %d)", r, init), r}
		} else {
			sem = semInfo{g.s.name("sem"), r}
			g.s.line("%s = Semaphore(%d, %d)", sem.name, r, init)
			g.sems = append(g.sems, sem)
		}
	} else {
		sem = g.sems[c.intn(len(g.sems))]
	}
	which := c.pick(10, 1, 1)
	if which != 2 {
		g.call(sem.name+".release", g.tb(false), "data_sync = "+g.syncType())
	}
	if which != 1 {
		g.call(sem.name+".acquire", g.tb(false), "data_sync = "+g.syncType())
	}
}

// switchOps declares a switch channel if needed and records a reduce and
// broadcast pair (or a packet broadcast) on members.
func (g *randGen) switchOps() {
	c := g.c
	var sw switchInfo
	if len(g.switches) == 0 || c.chance(1, 4) {
		n := 1 + c.intn(g.n)
		ranks := g.perm(g.n)[:n]
		if c.chance(1, 40) {
			ranks = append(ranks, ranks[0])
			g.dirty = true
		}
		sw = switchInfo{name: g.s.name("sw"), ranks: ranks, buf: "ios"[c.intn(3)]}
		bt := map[byte]string{'i': "input", 'o': "output", 's': "scratch"}[sw.buf]
		g.s.line("%s = SwitchChannel(%s, BufferType.%s)", sw.name, intList(ranks), bt)
		g.switches = append(g.switches, sw)
	} else {
		sw = g.switches[c.intn(len(g.switches))]
	}
	capacity := g.inLen
	switch sw.buf {
	case 'o':
		capacity = g.outLen
	case 's':
		capacity = 1 << 30
		for _, r := range sw.ranks {
			if r < g.n {
				capacity = min(capacity, g.scratchLen[r])
			}
		}
	}
	members := sw.ranks
	if !c.chance(1, 3) {
		members = []int{sw.ranks[c.intn(len(sw.ranks))]}
	}
	for _, m := range members {
		size := g.size(capacity)
		off := c.intn(capacity - size + 1)
		kinds := string(sw.buf)
		if sw.buf == 's' && len(g.bufs(m, "s")) == 0 {
			kinds = "io"
		}
		b := g.buf(m, kinds)
		ch := g.chunk(b, size)
		t := g.tb(false)
		view := fmt.Sprintf("%s.at_rank(%d)", sw.name, m)
		if sw.buf == 's' && kinds == "s" && c.chance(1, 3) {
			g.call(view+".broadcast_packets", ch, fmt.Sprint(off), fmt.Sprint(size), t)
			g.dirty = g.dirty || !g.ll
			continue
		}
		if c.chance(1, 6) {
			g.call(sw.name+".reduce", fmt.Sprint(m), fmt.Sprint(off), fmt.Sprint(size), ch, t)
		} else {
			g.call(view+".reduce", fmt.Sprint(off), fmt.Sprint(size), ch, t)
		}
		// A reduce not fused with its broadcast stays a glre, which the
		// MSCCL++ loader rejects.
		g.dirty = g.dirty || !g.fusion
		if !c.chance(1, 8) {
			g.call(view+".broadcast", ch, fmt.Sprint(off), fmt.Sprint(size), t)
		} else {
			g.dirty = true
		}
	}
}

// loop writes a Loop.iteration body of a few ops.
func (g *randGen) loop() {
	c := g.c
	unit := fmt.Sprintf("1 << %d", 10+c.intn(11))
	if c.chance(1, 10) {
		unit = fmt.Sprint([]int{0, 17, 4096 + 8, 1}[c.intn(4)])
		g.dirty = true
	}
	g.s.line("for _ in Loop.iteration(unit = %s, num_chunks = %d):", unit, 1+c.intn(4))
	g.s.indent++
	g.inLoop = true
	before := g.s.lines
	for i := 1 + c.intn(3); i > 0; i-- {
		g.statement(1)
	}
	if g.s.lines == before {
		g.s.line("pass")
	}
	g.inLoop = false
	g.s.indent--
}

// wrap writes a few statements inside a for loop, a conditional or a
// function that is then called.
func (g *randGen) wrap(depth int) {
	c := g.c
	saved := g.local
	g.local = true
	var after func()
	switch c.intn(3) {
	case 0:
		g.s.line("for _ in range(%d):", 1+c.intn(3))
	case 1:
		a, b := c.intn(4), c.intn(4)
		g.s.line("if %d <= %d:", a, b)
	default:
		fn := g.s.name("f")
		calls := 1 + c.intn(2)
		g.s.line("def %s(k):", fn)
		after = func() {
			for i := 0; i < calls; i++ {
				g.s.line("%s(%d)", fn, i)
			}
		}
	}
	g.s.indent++
	before := g.s.lines
	for i := 1 + c.intn(3); i > 0; i-- {
		g.statement(depth + 1)
	}
	if g.s.lines == before {
		g.s.line("pass")
	}
	g.s.indent--
	g.local = saved
	if after != nil {
		after()
	}
}

// noise writes plain Starlark that records nothing.
func (g *randGen) noise() {
	c := g.c
	v := g.s.name("v")
	if !g.local && c.chance(1, 6) {
		g.param(v)
		return
	}
	switch c.intn(11) {
	case 0:
		g.s.line("%s = [i * i for i in range(%d) if i %% 3 != 1]", v, c.intn(20))
	case 1:
		g.s.line("%s = {str(i): i << %d for i in range(%d)}", v, c.intn(100), c.intn(10))
	case 2:
		g.s.line("%s = ((1 << %d) - 1) // %d + len(%q) - (1 << 64)", v, 64+c.intn(300), 1+c.intn(1000), strings.Repeat("x", c.intn(5)))
	case 3:
		g.s.line(`%s = "-".join(["a%%d" %% i for i in range(%d)]).upper().split("-")`, v, c.intn(8))
	case 4:
		if g.local {
			g.s.line("%s = [x for x in reversed(range(%d))]", v, c.intn(9))
			return
		}
		fn := g.s.name("fib")
		g.s.line("def %s(k):", fn)
		g.s.line("    return k if k < 2 else %s(k - 1) + %s(k - 2)", fn, fn)
		g.s.line("%s = %s(%d)", v, fn, c.intn(14))
	case 5:
		g.s.line("%s = 0", v)
		g.s.line("while %s < %d:", v, c.intn(50))
		g.s.line("    %s += 1", v)
	case 6:
		g.s.line("%s = sorted(set([%d, %d, %d]), reverse = %s)", v, c.intn(9), c.intn(9), c.intn(9), pyBool(c.coin()))
	case 7:
		g.s.line("%s = [(i, r.rank) for i, r in enumerate(R)] + list(zip([1, 2], %q.elems()))", v, "ab")
	case 8:
		if c.chance(1, 10) {
			// A runaway loop: the step limit must stop it.
			g.s.line("for %s in range(1 << 40):", v)
			g.s.line("    pass")
			return
		}
		g.s.line("%s = dict(zip([\"a\", \"b\"], [%d, %d])).get(\"c\", 7 / 2)", v, c.intn(5), c.intn(5))
	case 9:
		g.s.line("%s = (%d * %d) %% %d if %d else -%d", v, c.intn(1000), c.intn(1000), 1+c.intn(97), c.intn(2), c.intn(9))
	default:
		g.s.line("%s = %q %% (%d, %s) + str(int(%d.5)) + repr([None, True, 1.5e300 * 10])", v, "%d-%s", c.intn(99), pyBool(c.coin()), c.intn(9))
	}
}

// param declares a script parameter, and often gives it a -D value
// (valid or not for its type).
func (g *randGen) param(v string) {
	c := g.c
	name := g.s.name("p")
	defaults := []string{"3", "-7", "(1 << 70)", "True", `"text"`, "2.5", `""`}
	def := defaults[c.intn(len(defaults))]
	g.s.line("%s = param(%q, %s, help = %q)", v, name, def, "a generated parameter")
	if c.coin() {
		values := []string{"4", "0x1f", "-0X10", "1_000", " 12 ", "99999999999999999999999", "true", "FALSE", "0", "1",
			"1e3", "-0.5", "nan", "inf", "", "h\u00e9llo", "12abc", "0x", "_1", "1__0", "+5"}
		val := values[c.intn(len(values))]
		g.defines[name] = val
		// A value that does not convert to the default's type fails the
		// evaluation; so does, rarely, a -D for no declared parameter.
		if c.chance(1, 30) {
			g.defines[name+"_undeclared"] = "1"
		}
	}
}

// look reads attributes and prints values of the DSL.
func (g *randGen) look() {
	c := g.c
	v := g.s.name("v")
	if c.coin() {
		g.probe(v)
		return
	}
	switch c.intn(9) {
	case 0:
		g.s.line("print(R[0], I[0], O[0], P)")
	case 1:
		g.s.line("%s = str(I[0][0:%d]) + repr(O[%d]) + str(P.collective)", v, min(1, g.inLen), c.intn(g.n))
	case 2:
		if len(g.chans) > 0 {
			ch := g.chans[c.intn(len(g.chans))].name
			g.s.line("%s = [%s.channel_id, %s.src_rank, %s.dst_rank, %s.channel_type, dir(%s), hasattr(%s, \"flush\")]", v, ch, ch, ch, ch, ch, ch)
		} else {
			g.s.line("%s = dir(R[0])", v)
		}
	case 3:
		g.s.line("%s = {I[0][0:0]: 1, SyncType.before: 2, R[0]: 3}", v)
	case 4:
		g.s.line("%s = sorted([Rank(%d), Rank(0)])", v, c.intn(g.n))
	case 5:
		g.s.line("%s = [P.name, P.num_ranks, P.instances, P.protocol, P.instr_fusion, P.max_message_size, P.replication_policy]", v)
	case 6:
		if len(g.switches) > 0 {
			sw := g.switches[c.intn(len(g.switches))].name
			g.s.line("%s = [%s.channel_ids, %s.rank_group.size, %s.buffer_type, %s.channel_type]", v, sw, sw, sw, sw)
		} else {
			g.s.line("%s = [SyncType.both ^ SyncType.before, BufferType.scratch.value, ChannelType.port.name]", v)
		}
	case 7:
		if len(g.groups) > 0 {
			gr := g.groups[c.intn(len(g.groups))]
			t := 0
			if len(gr.tbs) > 0 {
				t = gr.tbs[c.intn(len(gr.tbs))]
			}
			g.s.line("%s = [%s.numtb(), %s.tb_list, %s.get_internal_id(%d)]", v, gr.name, gr.name, gr.name, t)
		} else {
			g.s.line("%s = ThreadBlockGroup([0, 1]).numtb()", v)
		}
	default:
		if len(g.sems) > 0 {
			s := g.sems[c.intn(len(g.sems))].name
			g.s.line("%s = [%s.id, %s.rank, %s.initial_value]", v, s, s, s)
		} else {
			g.s.line("%s = [c.index for c in [I[0][0:0], O[0][0:0]]]", v)
		}
	}
}

// value returns the expression of a DSL value of the current program.
func (g *randGen) value() string {
	c := g.c
	r := c.intn(g.n)
	var vs []string
	vs = append(vs, fmt.Sprintf("R[%d]", r), fmt.Sprintf("I[%d]", r), fmt.Sprintf("O[%d]", r),
		g.chunk(g.buf(r, "io"), g.size(g.inLen)), "P", "P.collective", "SyncType.after", "BufferType.scratch",
		"ReduceOperationType.max", "ReplicationPolicy.interleaved", "ChannelType.switch", "Loop",
		fmt.Sprintf("ThreadBlockGroup(%s)", intList(g.perm(g.tbs))))
	for _, ch := range g.chans {
		vs = append(vs, ch.name)
	}
	for _, sw := range g.switches {
		vs = append(vs, sw.name, fmt.Sprintf("%s.at_rank(%d)", sw.name, sw.ranks[0]))
	}
	for _, sem := range g.sems {
		vs = append(vs, sem.name)
	}
	for _, gr := range g.groups {
		vs = append(vs, gr.name)
	}
	for _, b := range g.scratch[r] {
		vs = append(vs, b.expr)
	}
	return vs[c.intn(len(vs))]
}

// probe reads a DSL value every way the language offers: all its
// attributes, printing, comparison, hashing (rarely an operation it must
// refuse).
func (g *randGen) probe(v string) {
	c := g.c
	x, y := g.value(), g.value()
	switch c.pick(4, 2, 2, 2, 1, 1) {
	case 0:
		g.s.line("%s = [str(getattr(%s, a)) for a in dir(%s)] + [type(%s), repr(%s)]", v, x, x, x, x)
	case 1:
		g.s.line("%s = [%s == %s, %s != %s, %s in [%s], str([%s, %s])]", v, x, y, x, y, x, y, x, y)
	case 2:
		g.s.line("%s = sorted([R[%d], R[0], Rank(%d)]) + [R[0] < R[%d], R[%d] >= R[0], hash(\"x\")]", v, c.intn(g.n), c.intn(g.n), c.intn(g.n), c.intn(g.n))
	case 3:
		g.s.line("%s = {%s: 1, SyncType.before: 2, %s: 3}", v, g.chunk(g.buf(c.intn(g.n), "io"), g.size(g.inLen)), "BufferType.input")
	case 4:
		g.s.line("%s = [a for a in dir(%s) if hasattr(%s, a) and not a.startswith(\"_\")]", v, x, x)
	default:
		// Operations values must refuse, with an error.
		g.dirty = true
		ops := []string{"%s + 1", "-%s", "%s[0]", "len(%s)", "%s.nonexistent", "%s()", "[z for z in %s]", "%s < %s", "hash(%s)", "%s * 2", "%s | %s"}
		op := ops[c.intn(len(ops))]
		if strings.Count(op, "%s") == 2 {
			g.s.line("%s = "+op, v, x, y)
		} else {
			g.s.line("%s = "+op, v, x)
		}
	}
}

// bad writes a call the builtins must reject (or a construct they must
// handle).
func (g *randGen) bad() {
	c := g.c
	cases := []string{
		"Rank(-1)",
		"Buffer(0, -1)",
		fmt.Sprintf("MemoryChannel(%d, 0)", g.n),
		"R[0].copy(I[0][0:0], O[0][0:0])",
		"ThreadBlockGroup([0, 0])",
		`CollectiveProgram("x", 3, 2)`,
		"SyncType.before | 1",
		"{MemoryChannel(0, 0): 1}",
		`fail("generated failure")`,
		"Loop.iteration(unit = 1, num_chunks = 1)",
		"AllGather(0, 1, True)",
		"SwitchChannel([], BufferType.input)",
		"R[0].barrier([])",
		"Semaphore(0, 0).acquire(tb = None)",
		"TestCollective(1, -1, 0)",
		"I[0][0:1] < I[0][0:1]",
		`param("p", [1])`,
		`param("q", 3) + param("q", 4)`,
		"JSON() if False else None",
		"BufferType.input < BufferType.output",
	}
	g.s.line("%s", cases[c.intn(len(cases))])
	g.dirty = true
}
