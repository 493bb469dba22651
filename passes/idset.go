package passes

import "github.com/mscclgo/mscclgo/ir"

// idSetChain builds the channel id set of a chain of fused signal, wait or
// flush ops (F12–F14) without the cost of doing it literally.
//
// Literally, every fusion step replaces the set S by
// S.Union(R.IDSet).Copy(), which allocates two or three hash tables; a
// 64-rank allreduce fuses chains of 63 signals on every thread block, so
// that costs hundreds of megabytes. While a chain runs, idSetChain only
// records the ids (in fusion order, and as a membership bitmap for the
// disjointness test of F12/F13) and builds the set once, when the chain
// ends:
//
//   - Usually the last step stays in a case where the result is easy: when
//     every key of S ∪ R is smaller than the table that copy(S) starts from
//     (8 slots, or the smallest power of two above 2·|S|), every key lands
//     in its own home slot in every table of the step, whatever the layout
//     of S, so the result is the "identity" layout — key k in slot k — of a
//     table of copy's size for |S ∪ R| keys. ir.NewSet(keys...).Copy()
//     builds exactly that set (copy's table exceeds every key).
//   - Otherwise ir.FoldSet replays the whole chain step by step.
//
// Both give the set the literal steps give (TestIDSetChainMatchesLiteral).
// Chains whose operands hold more than one id (which the builtins never
// record) are done literally.
type idSetChain struct {
	active   bool     // the accumulated op's set is described here; its IDSet is stale
	identity bool     // the last step left the identity layout
	seq      []int    // ids in fusion order
	keys     []int    // distinct ids
	bits     []uint64 // membership of keys
	max      int      // largest key
}

func (c *idSetChain) has(k int) bool {
	return k>>6 < len(c.bits) && c.bits[k>>6]&(1<<(k&63)) != 0
}

// push records the next id of the chain.
func (c *idSetChain) push(k int) {
	c.seq = append(c.seq, k)
	if c.has(k) {
		return
	}
	for k>>6 >= len(c.bits) {
		c.bits = append(c.bits, 0)
	}
	c.bits[k>>6] |= 1 << (k & 63)
	c.keys = append(c.keys, k)
	c.max = max(c.max, k)
}

// disjoint reports whether the accumulated set of l and r's set share no
// key (F12, F13).
func (c *idSetChain) disjoint(l, r *ir.Op, fresh bool) bool {
	if !(fresh && c.active) {
		return l.IDSet.Disjoint(r.IDSet)
	}
	if r.IDSet.Len() == 1 {
		return !c.has(r.IDSet.First())
	}
	for _, k := range r.IDSet.Keys() {
		if c.has(k) {
			return false
		}
	}
	return true
}

// union makes acc's set set(S | R), where S is acc's current set (the
// chain's when fresh and c.active, else acc.IDSet) and R is r's set.
func (c *idSetChain) union(acc, r *ir.Op, fresh bool) {
	switch {
	case fresh && c.active && r.IDSet.Len() != 1:
		acc.IDSet = c.build().Union(r.IDSet).Copy() // leave the chain: literal from here
		return
	case fresh && !c.active, !c.active && acc.IDSet.Len() != 1, r.IDSet.Len() != 1:
		acc.IDSet = acc.IDSet.Union(r.IDSet).Copy() // a literal chain
		return
	case !c.active: // first step of the chain: acc is a copy of an original op
		c.reset()
		c.push(acc.IDSet.First())
		c.active = true
		acc.IDSet = nil // stale until finish
	}
	c.extend(r.IDSet.First())
}

// extend adds id x to an active chain: the step S -> set(S | {x}).
func (c *idSetChain) extend(x int) {
	c.identity = max(c.max, x) < ir.CopyTableSize(len(c.keys))
	c.push(x)
}

// finish gives the op that ends a chain its set, if the chain kept it.
func (c *idSetChain) finish(cur *ir.Op) {
	if c.active {
		cur.IDSet = c.build()
	}
}

// build returns the chain's set as an ir.Set and resets the chain.
func (c *idSetChain) build() *ir.Set {
	var s *ir.Set
	if c.identity {
		s = ir.NewSetCopy(c.keys...)
	} else {
		s = ir.FoldSet(c.seq)
	}
	c.reset()
	return s
}

func (c *idSetChain) reset() {
	for _, k := range c.keys {
		c.bits[k>>6] = 0
	}
	c.seq, c.keys = c.seq[:0], c.keys[:0]
	c.max = 0
	c.active, c.identity = false, false
}
