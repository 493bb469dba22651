package sass

import (
	"sort"
	"strconv"
	"strings"
)

// Loop is a natural loop of a function's control-flow graph: a header
// block that dominates a block branching back to it, and every block
// that reaches that branch without passing the header. Loops with the
// same header are one loop.
type Loop struct {
	Header uint64   // address of the header's first instruction
	Back   uint64   // address of the (last) branch back to the header
	Depth  int      // 1 for an outermost loop
	Parent int      // index of the enclosing loop in Loops' result, -1 if none
	Own    []Inst   // the instructions of the loop's blocks outside any inner loop
	Blocks []uint64 // the first addresses of every block of the loop, inner loops' too
	Inner  int      // how many loops are nested in it (at any depth)
}

type block struct {
	first, last int // instruction indices, inclusive
	succ, pred  []int
}

// branchTarget is the target address of a direct branch, the last
// "0x..." operand.
func branchTarget(args string) (uint64, bool) {
	f := strings.FieldsFunc(args, func(r rune) bool { return r == ' ' || r == ',' || r == '`' || r == '(' || r == ')' })
	for i := len(f) - 1; i >= 0; i-- {
		if strings.HasPrefix(f[i], "0x") {
			v, err := strconv.ParseUint(f[i][2:], 16, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// flow says how an instruction ends a block: whether it branches (and
// where), whether control may fall through to the next instruction,
// and whether its successors are unknown (an indirect branch).
func flow(in Inst) (target uint64, branches, falls, ends bool) {
	always := in.Pred == "" || in.Pred == "PT"
	switch in.Base() {
	case "BRA":
		t, ok := branchTarget(in.Args)
		// A branch with an operand before its target ("BRA !P0, 0x...",
		// "BRA.DIV UR4, 0x...") is conditional too.
		cond := !always || strings.Contains(in.Args, ",")
		return t, ok, cond, true
	case "EXIT", "RET", "BRX", "JMX", "JMP", "BPT", "KILL":
		return 0, false, !always, true
	}
	return 0, false, true, false
}

// Loops finds the natural loops of f, outermost first within each nest,
// in address order of their headers.
func Loops(f Function) []Loop {
	n := len(f.Insts)
	if n == 0 {
		return nil
	}
	blocks := graph(f)
	idom := dominators(blocks)
	dominates := func(a, b int) bool {
		for b >= 0 {
			if a == b {
				return true
			}
			if idom[b] == b {
				return false
			}
			b = idom[b]
		}
		return false
	}
	// Natural loops, merged by header.
	bodies := map[int]map[int]bool{}
	backOf := map[int]int{}
	for u := range blocks {
		for _, h := range blocks[u].succ {
			if idom[u] < 0 || !dominates(h, u) {
				continue
			}
			body := bodies[h]
			if body == nil {
				body = map[int]bool{h: true}
				bodies[h] = body
			}
			if u > backOf[h] {
				backOf[h] = u
			}
			stack := []int{u}
			for len(stack) > 0 {
				x := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if body[x] {
					continue
				}
				body[x] = true
				stack = append(stack, blocks[x].pred...)
			}
		}
	}
	headers := make([]int, 0, len(bodies))
	for h := range bodies {
		headers = append(headers, h)
	}
	// Larger loops first, so that a loop's parent precedes it.
	sort.Slice(headers, func(i, j int) bool {
		a, b := bodies[headers[i]], bodies[headers[j]]
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return headers[i] < headers[j]
	})
	loops := make([]Loop, len(headers))
	innermost := make([]int, len(blocks))
	for i := range innermost {
		innermost[i] = -1
	}
	for li, h := range headers {
		parent := -1
		for pj := li - 1; pj >= 0; pj-- {
			if bodies[headers[pj]][h] {
				parent = pj
				break
			}
		}
		// The smallest enclosing loop among the larger ones.
		for pj := 0; pj < li; pj++ {
			if bodies[headers[pj]][h] && (parent < 0 || len(bodies[headers[pj]]) < len(bodies[headers[parent]])) {
				parent = pj
			}
		}
		depth := 1
		if parent >= 0 {
			depth = loops[parent].Depth + 1
		}
		loops[li] = Loop{
			Header: f.Insts[blocks[h].first].Addr,
			Back:   f.Insts[blocks[backOf[h]].last].Addr,
			Depth:  depth,
			Parent: parent,
		}
		for b := range bodies[h] {
			innermost[b] = li // later (smaller) loops overwrite
			loops[li].Blocks = append(loops[li].Blocks, f.Insts[blocks[b].first].Addr)
		}
		sort.Slice(loops[li].Blocks, func(i, j int) bool { return loops[li].Blocks[i] < loops[li].Blocks[j] })
		for p := parent; p >= 0; p = loops[p].Parent {
			loops[p].Inner++
		}
	}
	for b := range blocks {
		if l := innermost[b]; l >= 0 {
			loops[l].Own = append(loops[l].Own, f.Insts[blocks[b].first:blocks[b].last+1]...)
		}
	}
	for i := range loops {
		sort.Slice(loops[i].Own, func(a, b int) bool { return loops[i].Own[a].Addr < loops[i].Own[b].Addr })
	}
	return loops
}

// graph splits f into basic blocks and links them: a block ends at a
// branch, an exit or the instruction before a branch target; its
// successors are its direct branch's target and, where control may fall
// through, the next block.
func graph(f Function) []block {
	n := len(f.Insts)
	index := make(map[uint64]int, n)
	for i, in := range f.Insts {
		index[in.Addr] = i
	}
	leader := make([]bool, n)
	leader[0] = true
	for i, in := range f.Insts {
		t, br, _, ends := flow(in)
		if br {
			if j, ok := index[t]; ok {
				leader[j] = true
			}
		}
		if ends && i+1 < n {
			leader[i+1] = true
		}
	}
	var blocks []block
	blockOf := make([]int, n)
	for i := 0; i < n; i++ {
		if leader[i] {
			blocks = append(blocks, block{first: i})
		}
		blockOf[i] = len(blocks) - 1
		blocks[len(blocks)-1].last = i
	}
	for b := range blocks {
		in := f.Insts[blocks[b].last]
		t, br, falls, _ := flow(in)
		if br {
			if j, ok := index[t]; ok {
				blocks[b].succ = append(blocks[b].succ, blockOf[j])
			}
		}
		if falls && b+1 < len(blocks) {
			blocks[b].succ = append(blocks[b].succ, b+1)
		}
		for _, s := range blocks[b].succ {
			blocks[s].pred = append(blocks[s].pred, b)
		}
	}
	return blocks
}

// dominators returns each block's immediate dominator (its own index for
// the roots, -1 for blocks never reached). The roots are block 0 and
// every other block without predecessors (reached only by an indirect
// branch, whose targets SASS does not name), all under one virtual root.
// Cooper, Harvey and Kennedy's iterative algorithm.
func dominators(blocks []block) []int {
	n := len(blocks)
	const root = -2
	var roots []int
	for b := range blocks {
		if b == 0 || len(blocks[b].pred) == 0 {
			roots = append(roots, b)
		}
	}
	// Reverse postorder from the virtual root.
	order := make([]int, 0, n)
	seen := make([]bool, n)
	type frame struct{ b, next int }
	for _, r := range roots {
		if seen[r] {
			continue
		}
		seen[r] = true
		stack := []frame{{r, 0}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next < len(blocks[top.b].succ) {
				s := blocks[top.b].succ[top.next]
				top.next++
				if !seen[s] {
					seen[s] = true
					stack = append(stack, frame{s, 0})
				}
				continue
			}
			order = append(order, top.b)
			stack = stack[:len(stack)-1]
		}
	}
	rpo := make([]int, n) // block -> position in reverse postorder
	for i := range rpo {
		rpo[i] = -1
	}
	for i, b := range order {
		rpo[b] = len(order) - 1 - i
	}
	idom := make([]int, n)
	for i := range idom {
		idom[i] = -1
	}
	isRoot := make([]bool, n)
	for _, r := range roots {
		idom[r] = root
		isRoot[r] = true
	}
	intersect := func(a, b int) int {
		for a != b {
			if a == root || b == root {
				return root
			}
			for rpo[a] > rpo[b] {
				a = idom[a]
				if a == root {
					return root
				}
			}
			for rpo[b] > rpo[a] {
				b = idom[b]
				if b == root {
					return root
				}
			}
		}
		return a
	}
	for changed := true; changed; {
		changed = false
		for i := len(order) - 1; i >= 0; i-- {
			b := order[i]
			if isRoot[b] {
				continue
			}
			nd := -1
			for _, p := range blocks[b].pred {
				if idom[p] == -1 {
					continue
				}
				if nd == -1 {
					nd = p
				} else {
					nd = intersect(p, nd)
				}
			}
			if nd != -1 && idom[b] != nd {
				idom[b] = nd
				changed = true
			}
		}
	}
	for b := range idom {
		if idom[b] == root {
			idom[b] = b
		}
	}
	return idom
}
