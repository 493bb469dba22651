package passes

import "github.com/mscclgo/mscclgo/ir"

// idSetChain builds the channel id set of a chain of fused signal, wait or
// flush ops (F12–F14) without the cost of doing it literally.
//
// Literally, every fusion step replaces the set S by
// S.Union(R.IDSet).Copy(), which allocates two or three hash tables; a
// 64-rank allreduce fuses chains of 63 signals on every thread block, so
// that costs hundreds of megabytes. The result of a step only depends on
// the layout of the tables involved, and one case is easy: when every key
// of S ∪ R is smaller than the table that copy(S) starts from (8 slots, or
// the smallest power of two above 2·|S|), every key lands in its own home
// slot in every table of the step, whatever the layout of S, and the
// result is the "identity" layout — key k in slot k — of a table of
// copy's size for |S ∪ R| keys. Two identity-layout sets with the same
// keys iterate, copy and merge alike, so the chain only records the keys
// while steps stay in that case, and builds the set once, as
// ir.NewSet(keys...).Copy() (an identity layout of exactly that size, since
// copy's table exceeds every key), when the chain ends or a step leaves
// the case. Steps outside it are done literally.
type idSetChain struct {
	virtual bool     // the accumulated op's set is the identity layout of keys
	keys    []int    // keys of the virtual set, in no particular order
	bits    []uint64 // membership of keys
	max     int      // largest key
}

// copyTableSize is the table size of copy(S) for a set of n keys (§4.6,
// Appendix A: merge into an empty 8-slot set).
func copyTableSize(n int) int {
	size := 8
	if n*5 >= 7*3 {
		for size <= 2*n {
			size *= 2
		}
	}
	return size
}

func (c *idSetChain) has(k int) bool {
	return k>>6 < len(c.bits) && c.bits[k>>6]&(1<<(k&63)) != 0
}

func (c *idSetChain) add(k int) {
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
	if !(fresh && c.virtual) {
		return l.IDSet.Disjoint(r.IDSet)
	}
	for _, k := range r.IDSet.Keys() {
		if c.has(k) {
			return false
		}
	}
	return true
}

// union makes acc's set set(S | R), where S is acc's current set (virtual
// when fresh and c.virtual, else acc.IDSet) and R is r's set.
func (c *idSetChain) union(acc, r *ir.Op, fresh bool) {
	rk := r.IDSet.Keys()
	if !(fresh && c.virtual) {
		c.reset()
		sk := acc.IDSet.Keys()
		hi := 0
		for _, k := range sk {
			hi = max(hi, k)
		}
		for _, k := range rk {
			hi = max(hi, k)
		}
		if hi >= copyTableSize(len(sk)) {
			acc.IDSet = acc.IDSet.Union(r.IDSet).Copy()
			return
		}
		for _, k := range sk {
			c.add(k)
		}
		c.virtual = true
		acc.IDSet = nil // stale until finish
	} else {
		hi := c.max
		for _, k := range rk {
			hi = max(hi, k)
		}
		if hi >= copyTableSize(len(c.keys)) {
			acc.IDSet = c.build().Union(r.IDSet).Copy()
			return
		}
	}
	for _, k := range rk {
		if !c.has(k) {
			c.add(k)
		}
	}
}

// finish gives the op that ends a chain its set, if the chain kept it
// virtual.
func (c *idSetChain) finish(cur *ir.Op) {
	if c.virtual {
		cur.IDSet = c.build()
	}
}

// build returns the virtual set as an ir.Set and resets the chain.
func (c *idSetChain) build() *ir.Set {
	s := ir.NewSet(c.keys...).Copy()
	c.reset()
	return s
}

func (c *idSetChain) reset() {
	for _, k := range c.keys {
		c.bits[k>>6] = 0
	}
	c.keys = c.keys[:0]
	c.max = 0
	c.virtual = false
}
