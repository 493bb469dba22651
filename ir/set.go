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
	s := &Set{table: newTable(8)}
	for _, k := range keys {
		s.Add(k)
	}
	return s
}

// Len returns the number of keys.
func (s *Set) Len() int { return s.fill }

// Keys returns the keys in iteration order.
func (s *Set) Keys() []int {
	out := make([]int, 0, s.fill)
	for _, k := range s.table {
		if k != emptySlot {
			out = append(out, k)
		}
	}
	return out
}

// Has reports whether k is in the set.
func (s *Set) Has(k int) bool {
	mask := len(s.table) - 1
	i := k & mask
	perturb := uint(k)
	for {
		n := 1
		if i+9 <= mask {
			n = 10
		}
		for j := 0; j < n; j++ {
			switch s.table[i+j] {
			case k:
				return true
			case emptySlot:
				return false
			}
		}
		perturb >>= 5
		i = (i*5 + 1 + int(perturb)) & mask
	}
}

// freeSlot returns the first free slot of k's probe sequence in t.
func freeSlot(t []int, k int) int {
	mask := len(t) - 1
	i := k & mask
	perturb := uint(k)
	for {
		n := 1
		if i+9 <= mask {
			n = 10
		}
		for j := 0; j < n; j++ {
			if t[i+j] == emptySlot {
				return i + j
			}
		}
		perturb >>= 5
		i = (i*5 + 1 + int(perturb)) & mask
	}
}

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
	c := &Set{table: newTable(8)}
	c.merge(s)
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
func (s *Set) Rebuilt() *Set { return NewSet(s.Keys()...) }
