package ir

// Set is a set of non-negative ints that iterates in the order CPython 3.11's
// set object would, for keys whose hash is the key itself. The reference DSL
// keeps signal/wait/flush channel ids in a Python set and prints them in
// iteration order, so byte parity needs the same open-addressing layout:
// tables of 8, 16, 32... slots, linear probing of up to 9 neighbours, then
// perturbed probing, and resizes at 3/5 fill.
type Set struct {
	table []int // -1 marks a free slot
	fill  int
	// small is the storage of the initial 8-slot table, so that the
	// common one-key set costs a single allocation.
	small [8]int
}

// empty returns a set with an empty 8-slot table.
func empty() *Set {
	s := &Set{}
	s.table = s.small[:]
	for i := range s.table {
		s.table[i] = emptySlot
	}
	return s
}

const emptySlot = -1

func newTable(n int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = emptySlot
	}
	return t
}

// NewSet returns the set built by adding the keys in order (Python's
// set(list)).
func NewSet(keys ...int) *Set {
	s := empty()
	for _, k := range keys {
		s.Add(k)
	}
	return s
}

// Len returns the number of keys.
func (s *Set) Len() int { return s.fill }

// Keys returns the keys in iteration order.
func (s *Set) Keys() []int { return s.AppendKeys(make([]int, 0, s.fill)) }

// AppendKeys appends the keys to dst in iteration order and returns the
// extended list.
func (s *Set) AppendKeys(dst []int) []int {
	for _, k := range s.table {
		if k != emptySlot {
			dst = append(dst, k)
		}
	}
	return dst
}

// First returns the first key in iteration order, or -1 for an empty set.
func (s *Set) First() int {
	for _, k := range s.table {
		if k != emptySlot {
			return k
		}
	}
	return emptySlot
}

// Has reports whether k is in the set.
func (s *Set) Has(k int) bool { return s.table[probe(s.table, k)] == k }

// probe walks k's probe sequence in table t (slot k&mask, up to nine
// linear neighbours, then perturbed jumps) and returns the first slot that
// holds k or is free.
func probe(t []int, k int) int {
	mask := len(t) - 1
	i := k & mask
	perturb := uint(k)
	for {
		n := 1
		if i+9 <= mask {
			n = 10
		}
		for j := 0; j < n; j++ {
			if x := t[i+j]; x == k || x == emptySlot {
				return i + j
			}
		}
		perturb >>= 5
		i = (i*5 + 1 + int(perturb)) & mask
	}
}

// freeSlot returns the first free slot of k's probe sequence in t, which
// does not hold k.
func freeSlot(t []int, k int) int { return probe(t, k) }

// Add inserts k (set.add).
func (s *Set) Add(k int) {
	if s.Has(k) {
		return
	}
	s.table[freeSlot(s.table, k)] = k
	s.fill++
	if s.fill*5 >= (len(s.table)-1)*3 {
		if s.fill > 50000 {
			s.resize(s.fill * 2)
		} else {
			s.resize(s.fill * 4)
		}
	}
}

func (s *Set) resize(minused int) {
	size := 8
	for size <= minused {
		size *= 2
	}
	old := s.table
	s.table = newTable(size)
	for _, k := range old {
		if k != emptySlot {
			s.table[freeSlot(s.table, k)] = k
		}
	}
}

// merge is s |= o.
func (s *Set) merge(o *Set) {
	if o.fill == 0 {
		return
	}
	if (s.fill+o.fill)*5 >= (len(s.table)-1)*3 {
		s.resize((s.fill + o.fill) * 2)
	}
	if s.fill == 0 && len(s.table) == len(o.table) {
		copy(s.table, o.table)
		s.fill = o.fill
		return
	}
	if s.fill == 0 {
		for _, k := range o.table {
			if k != emptySlot {
				s.table[freeSlot(s.table, k)] = k
			}
		}
		s.fill = o.fill
		return
	}
	for _, k := range o.table {
		if k != emptySlot {
			s.Add(k)
		}
	}
}

// Copy returns set(s).
func (s *Set) Copy() *Set {
	c := empty()
	c.merge(s)
	return c
}

// Clone returns an exact copy of s, with the same table layout (unlike
// Copy, which is Python's set(s) and may lay the keys out anew).
func (s *Set) Clone() *Set {
	c := &Set{fill: s.fill}
	if len(s.table) == len(c.small) {
		c.table = c.small[:]
	} else {
		c.table = make([]int, len(s.table))
	}
	copy(c.table, s.table)
	return c
}

// Union returns s | o as a new set.
func (s *Set) Union(o *Set) *Set {
	r := s.Copy()
	r.merge(o)
	return r
}

// Disjoint reports whether s and o share no key.
func (s *Set) Disjoint(o *Set) bool {
	for _, k := range o.table {
		if k != emptySlot && s.Has(k) {
			return false
		}
	}
	return true
}

// Rebuilt returns the set obtained by adding s's keys, in iteration order,
// to a fresh set: what Python's deepcopy does to a set.
//
// When every key is below the size the fresh table grows to, the last
// resize (or, without one, each insertion) puts every key in its own home
// slot, whatever the insertion order: the result is the identity layout of
// that size, built directly, and s itself when it already is that layout.
func (s *Set) Rebuilt() *Set {
	size := grownSize(s.fill)
	if maxKey(s.table) >= size {
		return NewSet(s.Keys()...)
	}
	if len(s.table) == size {
		return s
	}
	return identitySet(s.table, s.fill, size)
}

// NewSetCopy returns NewSet(keys...).Copy(), Python's set(set(keys)),
// building the identity layout directly where it applies (every key below
// the copy's table size; see Rebuilt).
func NewSetCopy(keys ...int) *Set {
	s := NewSet(keys...)
	size := CopyTableSize(s.fill)
	if maxKey(s.table) >= size {
		return s.Copy()
	}
	return identitySet(s.table, s.fill, size)
}

// CopyTableSize is the table size of Copy for a set of n keys: an empty
// 8-slot set merging n keys resizes first when they would fill it to 3/5.
func CopyTableSize(n int) int {
	if n*5 >= 7*3 {
		return tableSize(n * 2)
	}
	return 8
}

// identitySet returns a set of size slots holding the keys of table (fill
// of them, each below size) in their home slots.
func identitySet(table []int, fill, size int) *Set {
	s := &Set{fill: fill}
	if size == len(s.small) {
		s.table = s.small[:]
		for i := range s.table {
			s.table[i] = emptySlot
		}
	} else {
		s.table = newTable(size)
	}
	for _, k := range table {
		if k != emptySlot {
			s.table[k] = k
		}
	}
	return s
}

// maxKey returns the largest key of a table (-1 when empty).
func maxKey(table []int) int {
	m := emptySlot
	for _, k := range table {
		m = max(m, k)
	}
	return m
}

// grownSize is the table size of a set after n Adds of distinct keys to an
// empty set (the resize rule of Add).
func grownSize(n int) int {
	size := 8
	for fill := 1; fill <= n; fill++ {
		if fill*5 >= (size-1)*3 {
			minused := fill * 4
			if fill > 50000 {
				minused = fill * 2
			}
			size = tableSize(minused)
		}
	}
	return size
}

// FoldSet returns the set a fused signal, wait or flush holds after fusing
// ops with the channel ids ids, left to right: starting from {ids[0]}, each
// further id x gives set(S | {x}). It computes the same layout as repeated
// Union and Copy calls while reusing two buffers, which matters for long
// runs of fused ops.
func FoldSet(ids []int) *Set {
	if len(ids) == 0 {
		return NewSet()
	}
	cur := NewSet(ids[0])
	var tmp []int
	for _, x := range ids[1:] {
		// r := copy(cur)
		tmp = copyTable(tmp, cur.table, cur.fill)
		fill := cur.fill
		// merge(r, {x}): the pre-merge resize, then add(x).
		if (fill+1)*5 >= (len(tmp)-1)*3 {
			cur.table = rehash(cur.table, tmp, tableSize((fill+1)*2))
			tmp, cur.table = cur.table, tmp
		}
		r := &Set{table: tmp, fill: fill}
		r.Add(x)
		tmp = r.table
		// cur := copy(r)
		cur.table = copyTable(cur.table, r.table, r.fill)
		cur.fill = r.fill
	}
	return cur
}

// tableSize is the table size resize(minused) picks.
func tableSize(minused int) int {
	size := 8
	for size <= minused {
		size *= 2
	}
	return size
}

// copyTable returns the table of copy(s) for a set with table src and
// fill keys, reusing dst's storage.
func copyTable(dst, src []int, fill int) []int {
	size := CopyTableSize(fill)
	if size == len(src) {
		dst = resizeBuf(dst, size)
		copy(dst, src)
		return dst
	}
	return rehash(dst, src, size)
}

// rehash returns a table of size slots, reusing dst's storage, holding the
// keys of src inserted in src's slot order.
func rehash(dst, src []int, size int) []int {
	dst = resizeBuf(dst, size)
	for i := range dst {
		dst[i] = emptySlot
	}
	for _, k := range src {
		if k != emptySlot {
			dst[freeSlot(dst, k)] = k
		}
	}
	return dst
}

func resizeBuf(b []int, n int) []int {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]int, n)
}
