// templates_test.go holds the correct-algorithm generator of FuzzEval:
// collectives whose result is known to be right (all-pairs allgather,
// allreduce and reducescatter, alltoall, sendrecv, LL packet allgather
// and allreduce, an NVLS allreduce, a ring allgather through scratch),
// written with randomised rank and peer order, thread blocks and
// thread-block groups, piece splitting, channel kinds, intra-rank
// synchronisation, pipelined loops, instances, fusion and auto-sync, one
// or two programs a script. Their plans must load, check and run on the
// CPU backend with race detection, without deadlock, race or wrong
// element.
//
// Every template records the releasing side of every synchronisation (a
// signal, a semaphore release, a packet write) before the side that
// waits for it, keeps the waits of one channel on one thread block (or
// apart from later signals), makes every data dependency between thread
// blocks of one rank go through a semaphore or a barrier, and reads a
// chunk with the same pieces it was written with (replication maps a
// piece's instances to other bytes than the whole chunk's), so that no
// plan can deadlock or race.

package fuzz

import (
	"fmt"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
)

// template is a generated correct program and how to run it.
type template struct {
	kind  string
	text  string
	dtype executor.ElemType
}

// tmplGen writes one template.
type tmplGen struct {
	c       *choices
	s       *script
	n, f    int
	inplace bool
	tbs     int
	// pipe, when set, is the Loop.iteration line that wraps the
	// transfers; pipeLines counts the lines before its body.
	pipe      string
	pipeLines int
}

// templateKinds are the templates, in the order the generator's kind
// choice indexes them.
func templateKinds() []string {
	return []string{"allgather", "allreduce", "reducescatter", "alltoall", "sendrecv", "allreduce_packet", "allgather_packet", "allreduce_nvls", "allgather_ring"}
}

// genTemplates returns a template drawn from c, or (sometimes) two in one
// script: two programs, each with its own channels, semaphores, scratch
// and barriers.
func genTemplates(c *choices) template {
	t := genTemplate(c, "")
	if c.chance(1, 8) {
		u := genTemplate(c, "_second")
		t.kind += " + " + u.kind
		t.text += u.text
	}
	if c.chance(1, 8) {
		t.text += fmt.Sprintf("print(%q + JSON())\n", jsonMarker)
	}
	return t
}

// genTemplate returns a template drawn from c; suffix ends its program's
// name.
func genTemplate(c *choices, suffix string) template {
	g := &tmplGen{c: c, s: &script{}}
	kinds := templateKinds()
	kind := kinds[c.intn(len(kinds))]
	g.n = 2 + c.intn(7)
	if kind == "sendrecv" || kind == "allgather" {
		g.n = 1 + c.intn(8)
	}
	g.f = 1 + c.intn(4)
	g.inplace = c.coin()
	switch kind {
	case "alltoall", "sendrecv":
		g.inplace = false
	case "allreduce_nvls":
		g.inplace = true
	}
	g.tbs = 1 + c.intn(4)
	instances := 1 + c.intn(3)
	fusion, autoSync := !c.chance(1, 4), !c.chance(1, 4)
	if kind == "allreduce_nvls" {
		// An unfused switch reduce stays a glre, which no executor runs.
		fusion = true
	}
	protocol := "Simple"
	coll := map[string]string{
		"allgather": "AllGather", "allreduce": "AllReduce", "reducescatter": "ReduceScatter", "alltoall": "AllToAll",
		"sendrecv": "SendRecv", "allreduce_packet": "AllReduce", "allgather_packet": "AllGather", "allreduce_nvls": "AllReduce",
		"allgather_ring": "AllGather",
	}[kind]
	extra := ""
	switch kind {
	case "allreduce_packet", "allgather_packet":
		protocol = "LL"
		// An LL allgather needs both scratch halves: a rank writes its
		// packets into a peer's slot without first reading anything the
		// peer wrote after reading that slot, so in one scratch the next
		// launch's packets could overwrite this launch's before they are
		// read (a race across the launch boundary, docs/executor.md §5);
		// with two halves, launch k+2 writes a slot after the peer's
		// launch k+1 packets, which the peer wrote after reading it. The
		// allreduce's second phase is that handshake: one scratch will do.
		if kind == "allgather_packet" || c.coin() {
			extra += ", use_double_scratch_buffer = True"
		}
	case "allreduce_nvls", "allgather_ring":
	default:
		if c.chance(1, 3) {
			// The transfers in a pipelined loop: each op then moves its
			// operand a unit at a time; num_chunks at least the largest
			// op, so that every op is covered.
			unit := []string{"16", "32", "64", "1 << 20"}[c.intn(4)]
			g.pipe = fmt.Sprintf("for _ in Loop.iteration(unit = %s, num_chunks = %d):", unit, g.f+c.intn(2))
		}
		if c.chance(1, 6) {
			extra += ", use_double_scratch_buffer = True"
		}
	}
	if c.chance(1, 24) {
		// 64 MiB of scratch per rank in every session: rare, for speed.
		extra += ", reuse_resources = True"
	}
	s := g.s
	s.line("# FuzzEval: a correct %s (template)", kind)
	s.line("N = %d", g.n)
	s.line(`CollectiveProgram("tmpl_%s%s", %s(N, %d, %s), N, instances = %d, protocol = %q, instr_fusion = %s, auto_sync = %s%s)`,
		kind, suffix, coll, g.f, pyBool(g.inplace), instances, protocol, pyBool(fusion), pyBool(autoSync), extra)
	s.line("R = [Rank(r) for r in range(N)]")
	s.line("I = [r.get_input_buffer() for r in R]")
	s.line("O = [r.get_output_buffer() for r in R]")
	// Channels both ways between every pair, so that every signal and
	// wait pairs (the k-th channel of A to B with B's k-th back).
	s.line("M = {}")
	s.line("PC = {}")
	s.line("for r in range(N):")
	s.line("    for p in range(N):")
	s.line("        if p != r:")
	s.line("            M[(r, p)] = MemoryChannel(p, r)")
	s.line("            PC[(r, p)] = PortChannel(p, r)")
	switch kind {
	case "allgather":
		g.allgather()
	case "allreduce":
		g.reduce(true)
	case "reducescatter":
		g.reduce(false)
	case "alltoall":
		g.alltoall()
	case "sendrecv":
		g.sendrecv()
	case "allreduce_packet":
		g.allreducePacket()
	case "allgather_packet":
		g.allgatherPacket()
	case "allreduce_nvls":
		g.allreduceNVLS()
	case "allgather_ring":
		g.allgatherRing()
	}
	dtypes := []executor.ElemType{executor.Float16, executor.Float32, executor.BFloat16}
	return template{kind: kind, text: s.String(), dtype: dtypes[c.intn(len(dtypes))]}
}

// beginPipe opens the pipelined loop, if the template has one.
func (g *tmplGen) beginPipe() {
	if g.pipe == "" {
		return
	}
	g.s.line("%s", g.pipe)
	g.s.indent++
	g.pipeLines = g.s.lines
}

// endPipe closes the pipelined loop.
func (g *tmplGen) endPipe() {
	if g.pipe == "" {
		return
	}
	if g.s.lines == g.pipeLines {
		g.s.line("pass")
	}
	g.s.indent--
}

// pieces splits [0, f) into contiguous pieces.
func (g *tmplGen) pieces() [][2]int {
	var out [][2]int
	a := 0
	for a < g.f {
		b := a + 1 + g.c.intn(g.f-a)
		if !g.c.chance(1, 3) {
			b = g.f
		}
		out = append(out, [2]int{a, b})
		a = b
	}
	return out
}

// tb returns a thread-block argument: one block, or (when group is
// allowed) sometimes a group of blocks.
func (g *tmplGen) tb(group bool) string {
	if group && g.tbs > 1 && g.c.chance(1, 5) {
		n := 2 + g.c.intn(g.tbs-1)
		start := g.c.intn(g.tbs - n + 1)
		var ids []int
		for i := 0; i < n; i++ {
			ids = append(ids, start+i)
		}
		return "tb_group = ThreadBlockGroup(" + intList(ids) + ")"
	}
	return fmt.Sprintf("tb = %d", g.c.intn(g.tbs))
}

// otherTB returns a thread block other than tb (or tb when there is one).
func (g *tmplGen) otherTB(tb string) string {
	if g.tbs < 2 || !strings.HasPrefix(tb, "tb = ") {
		return tb
	}
	var t int
	fmt.Sscanf(tb, "tb = %d", &t)
	return fmt.Sprintf("tb = %d", (t+1+g.c.intn(g.tbs-1))%g.tbs)
}

// peers returns the ranks other than r, shuffled.
func (g *tmplGen) peers(r int) []int {
	var out []int
	for _, p := range (&randGen{c: g.c}).perm(g.n) {
		if p != r {
			out = append(out, p)
		}
	}
	return out
}

func (g *tmplGen) ranks() []int { return (&randGen{c: g.c}).perm(g.n) }

func chunk(buf string, r, a, b int) string { return fmt.Sprintf("%s[%d][%d:%d]", buf, r, a, b) }

// crossTB hands a rank's data from thread block from to thread block to
// (a semaphore, or a barrier of the two) and returns to.
func (g *tmplGen) crossTB(r int, from, to string) {
	if from == to {
		return
	}
	var a, b int
	fmt.Sscanf(from, "tb = %d", &a)
	fmt.Sscanf(to, "tb = %d", &b)
	if g.c.coin() {
		name := g.s.name("sem")
		g.s.line("%s = Semaphore(%d, 0)", name, r)
		g.s.line("%s.release(%s, data_sync = SyncType.before)", name, from)
		g.s.line("%s.acquire(%s, data_sync = SyncType.after)", name, to)
		return
	}
	g.s.line("R[%d].barrier([%d, %d])", r, a, b)
}

// completion optionally ends with a signal from every rank to every peer
// and the matching waits (which changes nothing the run checks, but adds
// sync ops for fusion and sync insertion).
// A kind of channel that earlier waits use is not used: a completion
// wait could take the signal an earlier wait (on another thread block)
// needs, whose thread block would then wait for a completion signal that
// its peer sends only after its own earlier waits: a deadlock, or a get
// before its data.
func (g *tmplGen) completion(memOK, portOK bool) {
	if !g.c.coin() || !memOK && !portOK {
		return
	}
	port := (g.c.chance(1, 3) || !memOK) && portOK
	ch := "M"
	if port {
		ch = "PC"
	}
	for _, r := range g.ranks() {
		for _, p := range g.peers(r) {
			g.s.line("%s[(%d, %d)].signal(%s, data_sync = SyncType.before)", ch, r, p, g.tb(false))
		}
	}
	for _, r := range g.ranks() {
		for _, p := range g.peers(r) {
			g.s.line("%s[(%d, %d)].wait(%s, data_sync = SyncType.after)", ch, r, p, g.tb(false))
		}
	}
}

// allgather: every rank sends its chunk to every peer's slot by memory
// put, port put, port put with signal, or a get by the peer after a
// signal. A peer that gets waits for one signal, sent once every piece of
// the chunk is in place (pieces on one thread block, so that the signal
// follows them).
func (g *tmplGen) allgather() {
	f := g.f
	src := func(r, a, b int) string {
		if g.inplace {
			return chunk("O", r, r*f+a, r*f+b)
		}
		return chunk("I", r, a, b)
	}
	type pending struct {
		r, p   int
		port   bool // a pws to wait for; else gets to make
		a, b   int  // the pws's piece
		pieces [][2]int
	}
	g.beginPipe()
	var later []pending
	anyGet, anyPWS := false, false
	for _, r := range g.ranks() {
		peers := g.peers(r)
		how := map[int]int{}
		get := false
		for _, p := range peers {
			how[p] = g.c.intn(4)
			get = get || how[p] == 3
		}
		anyGet = anyGet || get
		own := g.tb(!get)
		pieces := g.pieces()
		for _, pc := range pieces {
			a, b := pc[0], pc[1]
			if !g.inplace {
				g.s.line("R[%d].copy(%s, %s, %s)", r, chunk("O", r, r*f+a, r*f+b), chunk("I", r, a, b), own)
			}
			for _, p := range peers {
				dst := chunk("O", p, r*f+a, r*f+b)
				switch how[p] {
				case 0:
					g.s.line("M[(%d, %d)].put(%s, %s, %s)", r, p, dst, src(r, a, b), g.tb(true))
				case 1:
					g.s.line("PC[(%d, %d)].put(%s, %s, %s)", r, p, dst, src(r, a, b), g.tb(false))
				case 2:
					fn := "put_with_signal"
					if g.c.coin() {
						fn = "put_with_signal_and_flush"
					}
					g.s.line("PC[(%d, %d)].%s(%s, %s, %s)", r, p, fn, dst, src(r, a, b), g.tb(false))
					later = append(later, pending{r: r, p: p, port: true, a: a, b: b})
					anyPWS = true
				}
			}
		}
		for _, p := range peers {
			if how[p] == 3 {
				g.s.line("M[(%d, %d)].signal(%s, data_sync = SyncType.before)", r, p, own)
				later = append(later, pending{r: r, p: p, pieces: pieces})
			}
		}
	}
	// One thread block waits for all the signals of a pair: waits of one
	// channel on several thread blocks could take each other's signals.
	waitTB := map[[2]int]string{}
	for _, x := range later {
		t, ok := waitTB[[2]int{x.p, x.r}]
		if !ok {
			t = g.tb(false)
			waitTB[[2]int{x.p, x.r}] = t
		}
		if x.port {
			g.s.line("PC[(%d, %d)].wait(%s, data_sync = SyncType.after)", x.p, x.r, t)
			continue
		}
		g.s.line("M[(%d, %d)].wait(%s, data_sync = SyncType.after)", x.p, x.r, t)
		for _, pc := range x.pieces {
			a, b := pc[0], pc[1]
			// From where the chunk comes from, not from the peer's
			// output: the peer's next launch copies its input there
			// again, which nothing orders after this get (a race across
			// the launch boundary, docs/executor.md §5).
			g.s.line("M[(%d, %d)].get(%s, %s, %s)", x.p, x.r, chunk("O", x.p, x.r*f+a, x.r*f+b), src(x.r, a, b), t)
		}
	}
	g.endPipe()
	if g.pipe != "" && len(later) > 0 {
		// A thread block that has left its pipeline could take, for its
		// completion wait, a signal that a wait in a pipeline needs.
		return
	}
	g.completion(!anyGet, !anyPWS)
}

// reduce: rank r owns chunk r: it sums the peers' chunk r into its
// result, by a chain of memory-channel reductions or by gets into scratch
// and one local reduction; for allreduce it then sends the result to
// every peer.
func (g *tmplGen) reduce(all bool) {
	f := g.f
	scratch := map[int]string{}
	g.beginPipe()
	for _, r := range g.ranks() {
		R := r * f
		for _, pc := range g.pieces() {
			a, b := pc[0], pc[1]
			dst := chunk("O", r, R+a, R+b)
			if !all {
				dst = chunk("O", r, a, b)
			}
			if g.inplace && g.c.coin() {
				// The same memory through the input buffer.
				dst = chunk("I", r, R+a, R+b)
			}
			t := g.tb(true)
			peers := g.peers(r)
			if g.c.chance(1, 3) && !strings.HasPrefix(t, "tb_group") {
				// Gets into scratch (slot k for the k-th peer), then one
				// local reduction.
				if scratch[r] == "" {
					scratch[r] = g.s.name("S")
					g.s.line("%s = Buffer(%d, %d)", scratch[r], r, (g.n-1)*f)
				}
				var got []string
				for k, p := range peers {
					sc := fmt.Sprintf("%s[%d:%d]", scratch[r], k*f+a, k*f+b)
					g.s.line("M[(%d, %d)].get(%s, %s, %s)", r, p, sc, chunk("I", p, R+a, R+b), t)
					got = append(got, sc)
				}
				if len(got) == 0 {
					g.s.line("R[%d].copy(%s, %s, %s)", r, dst, chunk("I", r, R+a, R+b), t)
				} else {
					g.s.line("R[%d].reduce(%s, [%s], %s, dst_chunk = %s)", r, chunk("I", r, R+a, R+b), strings.Join(got, ", "), t, dst)
				}
			} else {
				for k, p := range peers {
					if k == 0 {
						g.s.line("M[(%d, %d)].reduce(%s, [%s], %s, local_dst_chunk = %s)", r, p, chunk("I", r, R+a, R+b), chunk("I", p, R+a, R+b), t, dst)
					} else {
						g.s.line("M[(%d, %d)].reduce(%s, [%s], %s)", r, p, dst, chunk("I", p, R+a, R+b), t)
					}
				}
			}
			if !all {
				continue
			}
			send := t
			if g.c.chance(1, 3) && !strings.HasPrefix(t, "tb_group") {
				send = g.otherTB(t)
				g.crossTB(r, t, send)
			}
			for _, p := range peers {
				out := chunk("O", p, R+a, R+b)
				if g.inplace && g.c.coin() {
					out = chunk("I", p, R+a, R+b)
				}
				if g.c.chance(1, 4) && !strings.HasPrefix(send, "tb_group") {
					g.s.line("PC[(%d, %d)].put(%s, %s, %s)", r, p, out, dst, send)
					// The proxy reads dst after the thread block moved
					// on; the next launch writes it again: flush first
					// (docs/executor.md §5).
					g.s.line("PC[(%d, %d)].flush(%s)", r, p, send)
				} else {
					g.s.line("M[(%d, %d)].put(%s, %s, %s)", r, p, out, dst, send)
				}
			}
		}
	}
	g.endPipe()
	g.completion(true, true)
}

// alltoall (out of place): chunk p of rank r goes to slot r of rank p,
// by put, port put or a get by p.
func (g *tmplGen) alltoall() {
	f := g.f
	g.beginPipe()
	for _, r := range g.ranks() {
		for _, pc := range g.pieces() {
			a, b := pc[0], pc[1]
			g.s.line("R[%d].copy(%s, %s, %s)", r, chunk("O", r, r*f+a, r*f+b), chunk("I", r, r*f+a, r*f+b), g.tb(true))
			for _, p := range g.peers(r) {
				dst, src := chunk("O", p, r*f+a, r*f+b), chunk("I", r, p*f+a, p*f+b)
				switch g.c.intn(3) {
				case 0:
					g.s.line("M[(%d, %d)].put(%s, %s, %s)", r, p, dst, src, g.tb(true))
				case 1:
					g.s.line("PC[(%d, %d)].put(%s, %s, %s)", r, p, dst, src, g.tb(false))
				default:
					g.s.line("M[(%d, %d)].get(%s, %s, %s)", p, r, dst, src, g.tb(true))
				}
			}
		}
	}
	g.endPipe()
	g.completion(true, true)
}

// sendrecv: rank r sends its input to rank r+1.
func (g *tmplGen) sendrecv() {
	g.beginPipe()
	for _, r := range g.ranks() {
		next := (r + 1) % g.n
		for _, pc := range g.pieces() {
			a, b := pc[0], pc[1]
			dst, src := chunk("O", next, a, b), chunk("I", r, a, b)
			switch {
			case next == r:
				g.s.line("R[%d].copy(%s, %s, %s)", r, dst, src, g.tb(true))
			case g.c.coin():
				g.s.line("M[(%d, %d)].put(%s, %s, %s)", r, next, dst, src, g.tb(true))
			case g.c.coin():
				g.s.line("PC[(%d, %d)].put(%s, %s, %s)", r, next, dst, src, g.tb(false))
			default:
				g.s.line("M[(%d, %d)].get(%s, %s, %s)", next, r, dst, src, g.tb(true))
			}
		}
	}
	g.endPipe()
	g.completion(true, true)
}

// allreducePacket is allreduce_packet.star with random thread blocks: the
// peers' parts go as packets to the owner's scratch, the owner reduces
// them and sends the sum as packets to every peer, which unpacks it.
func (g *tmplGen) allreducePacket() {
	n, f := g.n, g.f
	s := g.s
	s.line("SC = [Buffer(r, %d) for r in range(N)]", 2*n*f)
	res := func(r int, a, b int) string {
		if g.inplace {
			return chunk("I", r, a, b)
		}
		return chunk("O", r, a, b)
	}
	for _, r := range g.ranks() {
		for _, p := range g.peers(r) {
			for _, pc := range g.pieces() {
				a, b := pc[0], pc[1]
				s.line("M[(%d, %d)].put_packets(SC[%d][%d:%d], %s, %s)", r, p, p, r*f+a, r*f+b, chunk("I", r, p*f+a, p*f+b), g.tb(true))
			}
		}
	}
	for _, r := range g.ranks() {
		for _, pc := range g.pieces() {
			a, b := pc[0], pc[1]
			t := g.tb(true)
			var got []string
			for _, p := range g.peers(r) {
				got = append(got, fmt.Sprintf("SC[%d][%d:%d]", r, p*f+a, p*f+b))
			}
			s.line("R[%d].reduce(%s, [%s], %s, dst_chunk = %s, packet = True)", r, chunk("I", r, r*f+a, r*f+b), strings.Join(got, ", "), t, res(r, r*f+a, r*f+b))
			for _, p := range g.peers(r) {
				s.line("M[(%d, %d)].put_packets(SC[%d][%d:%d], %s, %s)", r, p, p, n*f+r*f+a, n*f+r*f+b, res(r, r*f+a, r*f+b), t)
			}
		}
	}
	for _, r := range g.ranks() {
		for _, p := range g.peers(r) {
			for _, pc := range g.pieces() {
				a, b := pc[0], pc[1]
				s.line("R[%d].unpack_packets(%s, SC[%d][%d:%d], %s)", r, res(r, p*f+a, p*f+b), r, n*f+p*f+a, n*f+p*f+b, g.tb(true))
			}
		}
	}
}

// allgatherPacket sends every rank's chunk as packets into every peer's
// scratch, directly or along a ring (copy_packets, then read_put_packets
// forwarding), and every rank unpacks what it received.
func (g *tmplGen) allgatherPacket() {
	n, f := g.n, g.f
	s := g.s
	s.line("SC = [Buffer(r, %d) for r in range(N)]", n*f)
	src := func(r, a, b int) string {
		if g.inplace {
			return chunk("O", r, r*f+a, r*f+b)
		}
		return chunk("I", r, a, b)
	}
	if !g.inplace {
		for _, r := range g.ranks() {
			s.line("R[%d].copy(%s, %s, %s)", r, chunk("O", r, r*f, r*f+f), chunk("I", r, 0, f), g.tb(true))
		}
	}
	if g.c.coin() {
		for _, r := range g.ranks() {
			for _, p := range g.peers(r) {
				s.line("M[(%d, %d)].put_packets(SC[%d][%d:%d], %s, %s)", r, p, p, r*f, r*f+f, src(r, 0, f), g.tb(true))
			}
		}
	} else {
		// The ring: at step k, rank r forwards chunk r-k+1 to rank r+1.
		for _, r := range g.ranks() {
			s.line("R[%d].copy_packets(SC[%d][%d:%d], %s, %s)", r, r, r*f, r*f+f, src(r, 0, f), g.tb(true))
		}
		for k := 1; k < n; k++ {
			for _, r := range g.ranks() {
				c := ((r-k+1)%n + n) % n
				next := (r + 1) % n
				s.line("M[(%d, %d)].read_put_packets(SC[%d][%d:%d], SC[%d][%d:%d], %s)", r, next, next, c*f, c*f+f, r, c*f, c*f+f, g.tb(true))
			}
		}
	}
	for _, r := range g.ranks() {
		for _, p := range g.peers(r) {
			s.line("R[%d].unpack_packets(%s, SC[%d][%d:%d], %s)", r, chunk("O", r, p*f, p*f+f), r, p*f, p*f+f, g.tb(true))
		}
	}
}

// allreduceNVLS (in place): rank r reduces chunk r over a switch channel
// bound to every rank's input and broadcasts the sum back (fused into
// glres), piece by piece, each piece's pair on one thread block.
func (g *tmplGen) allreduceNVLS() {
	f := g.f
	g.s.line("SW = SwitchChannel(%s, BufferType.input)", intList(g.ranks()))
	for _, r := range g.ranks() {
		for _, pc := range g.pieces() {
			a, b := r*f+pc[0], r*f+pc[1]
			t := g.tb(false)
			if g.c.coin() {
				g.s.line("SW.at_rank(%d).reduce(buffer_offset = %d, size = %d, dst_chunk = %s, %s)", r, a, b-a, chunk("I", r, a, b), t)
			} else {
				g.s.line("SW.reduce(%d, %d, %d, %s, %s)", r, a, b-a, chunk("I", r, a, b), t)
			}
			g.s.line("SW.at_rank(%d).broadcast(src_chunk = %s, buffer_offset = %d, size = %d, %s)", r, chunk("I", r, a, b), a, b-a, t)
		}
	}
}

// allgatherRing passes every chunk around the ring through the scratch
// buffers (Simple protocol): at hop k, rank r sends chunk r-k+1 to the
// scratch of rank r+1 and signals it; before forwarding it waits for the
// previous hop. Each rank runs its part of the ring on one thread block
// (waits, then the puts of what it waited for), and copies what it
// received from its scratch to its output. It opens with a handshake
// with both neighbours, since the next launch reuses the scratch slots
// (without it the plan races across the launch boundary). Every op uses the same pieces
// of a chunk: replication gives instance k of a piece other bytes than
// instance k of the whole chunk, so a reader must read what the writer
// of its own instance wrote.
func (g *tmplGen) allgatherRing() {
	n, f := g.n, g.f
	s := g.s
	s.line("SC = [Buffer(r, %d) for r in range(N)]", n*f)
	pieces := g.pieces()
	// How a hop's data goes: memory put and signal, port put and signal,
	// or a port put with signal per piece.
	mode := g.c.intn(3)
	ch, relaxed := "M", ""
	if mode > 0 {
		ch = "PC"
	} else if g.c.coin() {
		relaxed = ", relaxed = True"
	}
	signals := 1
	if mode == 2 {
		signals = len(pieces)
	}
	ringTB := map[int]string{}
	for r := 0; r < n; r++ {
		ringTB[r] = g.tb(false)
	}
	// src is where rank r's own chunk is: the buffer and its offset.
	src := func(r int) (string, int) {
		if g.inplace {
			return fmt.Sprintf("O[%d]", r), r * f
		}
		return fmt.Sprintf("I[%d]", r), 0
	}
	if !g.inplace {
		for _, r := range g.ranks() {
			s.line("R[%d].copy(%s, %s, %s)", r, chunk("O", r, r*f, r*f+f), chunk("I", r, 0, f), ringTB[r])
		}
	}
	// The launch-boundary handshake: every rank tells the rank that writes
	// its scratch that this launch began (so its reads of the last launch
	// are done), and a rank puts only after its successor said so: the
	// scratch is reused from launch to launch (docs/executor.md §5).
	for _, r := range g.ranks() {
		s.line("%s[(%d, %d)].signal(%s, data_sync = SyncType.before)", ch, r, (r-1+n)%n, ringTB[r])
	}
	for _, r := range g.ranks() {
		s.line("%s[(%d, %d)].wait(%s, data_sync = SyncType.after)", ch, r, (r+1)%n, ringTB[r])
	}
	wait := func(r, prev int) {
		for i := 0; i < signals; i++ {
			s.line("%s[(%d, %d)].wait(%s, data_sync = SyncType.after%s)", ch, r, prev, ringTB[r], relaxed)
		}
	}
	for k := 1; k < n; k++ {
		for _, r := range g.ranks() {
			c := ((r-k+1)%n + n) % n
			next, prev := (r+1)%n, (r-1+n)%n
			buf, base := src(r)
			if k > 1 {
				wait(r, prev)
				buf, base = fmt.Sprintf("SC[%d]", r), c*f
			}
			for _, pc := range pieces {
				a, b := pc[0], pc[1]
				if mode == 2 {
					s.line("PC[(%d, %d)].put_with_signal(SC[%d][%d:%d], %s[%d:%d], %s)", r, next, next, c*f+a, c*f+b, buf, base+a, base+b, ringTB[r])
				} else {
					s.line("%s[(%d, %d)].put(SC[%d][%d:%d], %s[%d:%d], %s)", ch, r, next, next, c*f+a, c*f+b, buf, base+a, base+b, ringTB[r])
				}
			}
			if mode != 2 {
				s.line("%s[(%d, %d)].signal(%s, data_sync = SyncType.before%s)", ch, r, next, ringTB[r], relaxed)
			}
		}
	}
	// The last hop's data, then every received chunk to the output.
	for _, r := range g.ranks() {
		wait(r, (r-1+n)%n)
		for _, c := range g.peers(r) {
			for _, pc := range pieces {
				a, b := pc[0], pc[1]
				s.line("R[%d].copy(%s, SC[%d][%d:%d], %s)", r, chunk("O", r, c*f+a, c*f+b), r, c*f+a, c*f+b, ringTB[r])
			}
		}
	}
}
