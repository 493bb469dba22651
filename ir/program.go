package ir

import (
	"math/big"

	"go.starlark.net/syntax"
)

// Program is one collective program: its header, one GPU record per rank,
// and the signal/wait counters that pass 1 checks. starlib records into it;
// passes rewrite it in place; emit writes it.
type Program struct {
	Name           string
	Collective     string // plan "collective": allgather, allreduce, ...
	Protocol       string // "Simple" or "LL"
	Inplace        bool
	ReuseResources bool
	NumRanks       int
	Instances      int
	InstrFusion    bool
	AutoSync       bool
	Policy         ReplicationPolicy

	NumThreadsPerBlock     *big.Int
	UseDoubleScratchBuffer bool
	BufferAlignment        *big.Int
	MinMessageSize         *big.Int
	MaxMessageSize         *big.Int

	GPUs []*GPU

	// Signals and Waits count pairing events (docs/language.md §16), keyed by
	// (channel src rank, channel dst rank, kind).
	Signals map[PairKey]*PairCount
	Waits   map[PairKey]*PairCount

	// Pos is where the program was created.
	Pos syntax.Position

	// Finalized is set by passes.Run, which refuses a finalized program:
	// the passes are not idempotent and must run exactly once.
	// Fused reports that the thread blocks' op lists were fused as they
	// were recorded (passes.Appender), so the fuse pass must not run again.
	Fused     bool
	Finalized bool
}

// PairKey identifies a direction of signal/wait traffic.
type PairKey struct {
	Src, Dst int
	Kind     ChannelType
}

// PairCount is a signal or wait count: the position of every call that
// counted, in call order (the count is their number), for error messages.
type PairCount struct {
	Calls []syntax.Position
}

// GPU is the record of one rank.
type GPU struct {
	ID                                       int
	InputChunks, OutputChunks, ScratchChunks int
	ThreadBlocks                             []*ThreadBlock
	// Channels holds the memory and port channel tables in order of the
	// first channel of each kind created with this rank as source.
	Channels []ChannelTable
	// Switches lists the switch channels that include this rank, in
	// creation order.
	Switches      []SwitchEntry
	RemoteBuffers []RemoteBuffer
	Semaphores    []*big.Int // init values, in creation order

	barrierIDs map[string]int
	// rbPos finds RemoteBuffers entries: rbPos[rank*numBufferTypes+buffer]
	// is the entry's index plus one, or 0 where it is not indexed yet.
	rbPos []int32
}

// ChannelTable is a rank's list of channels of one kind: ConnectedTo[k] is
// the destination of the channel with per-rank id k.
type ChannelTable struct {
	Type        ChannelType
	ConnectedTo []int
}

// SwitchEntry is one switch channel as seen by one member rank.
type SwitchEntry struct {
	Buffer BufferType
	Ranks  []int
}

// RemoteBuffer is a buffer of another rank reached through channels.
type RemoteBuffer struct {
	Rank   int
	Buffer BufferType
	Memory bool // reached through memory channels
	Port   bool // reached through port channels
}

// AccessTypes returns the access channel kinds, memory before port.
func (r RemoteBuffer) AccessTypes() []ChannelType {
	var out []ChannelType
	if r.Memory {
		out = append(out, Memory)
	}
	if r.Port {
		out = append(out, Port)
	}
	return out
}

// ThreadBlock is one thread block of one rank.
type ThreadBlock struct {
	ID  int
	Ops []*Op
	// Channels holds, per channel kind in order of first registration on
	// this block, the rank-level channel ids in order of first use; an op's
	// channel index is a position in this list.
	Channels []IDTable
	// RemoteRefs holds, per access kind in order of first use, the
	// rank-level remote buffer ids in order of first use.
	RemoteRefs []IDTable

	// chPos and rbPos find ids in Channels and RemoteRefs: chPos[t][id] is
	// id's position in the table of kind t plus one, or 0 where it is not
	// indexed yet. Tables only grow, so an indexed position stays valid.
	chPos, rbPos [numChannelTypes][]int32
}

// IDTable is a per-kind list of ids.
type IDTable struct {
	Type ChannelType
	IDs  []int
}

// NewProgram returns an empty program with one GPU per rank, each with the
// given buffer sizes in chunks.
func NewProgram(numRanks, inputChunks, outputChunks int) *Program {
	p := &Program{
		NumRanks:  numRanks,
		Instances: 1,
		Signals:   map[PairKey]*PairCount{},
		Waits:     map[PairKey]*PairCount{},
	}
	for r := 0; r < numRanks; r++ {
		p.GPUs = append(p.GPUs, &GPU{ID: r, InputChunks: inputChunks, OutputChunks: outputChunks})
	}
	return p
}

// Count records one signal (or wait) in m and returns k's count, which a
// caller may keep and pass to Add for later calls on the same pair.
func Count(m map[PairKey]*PairCount, k PairKey, pos syntax.Position) *PairCount {
	c, ok := m[k]
	if !ok {
		c = &PairCount{}
		m[k] = c
	}
	c.Add(pos)
	return c
}

// Add records one more call at pos.
func (c *PairCount) Add(pos syntax.Position) {
	c.Calls = append(c.Calls, pos)
}

// TB returns thread block tb of the rank, creating blocks 0..tb as needed.
func (g *GPU) TB(tb int) *ThreadBlock {
	for len(g.ThreadBlocks) <= tb {
		g.ThreadBlocks = append(g.ThreadBlocks, &ThreadBlock{ID: len(g.ThreadBlocks)})
	}
	return g.ThreadBlocks[tb]
}

// AddChannel records a new channel of kind t from this rank to dst and
// returns its per-rank id.
func (g *GPU) AddChannel(t ChannelType, dst int) int {
	for i := range g.Channels {
		if g.Channels[i].Type == t {
			g.Channels[i].ConnectedTo = append(g.Channels[i].ConnectedTo, dst)
			return len(g.Channels[i].ConnectedTo) - 1
		}
	}
	g.Channels = append(g.Channels, ChannelTable{Type: t, ConnectedTo: []int{dst}})
	return 0
}

// AddSwitch records a switch channel including this rank and returns its
// per-rank id.
func (g *GPU) AddSwitch(b BufferType, ranks []int) int {
	g.Switches = append(g.Switches, SwitchEntry{Buffer: b, Ranks: append([]int(nil), ranks...)})
	return len(g.Switches) - 1
}

// AddSemaphore records a semaphore and returns its id.
func (g *GPU) AddSemaphore(init *big.Int) int {
	g.Semaphores = append(g.Semaphores, init)
	return len(g.Semaphores) - 1
}

// BarrierID returns the id of the ordered thread-block list on this rank,
// assigning the next one on first use.
func (g *GPU) BarrierID(tbs []int) int {
	if g.barrierIDs == nil {
		g.barrierIDs = map[string]int{}
	}
	key := string(appendInts(nil, tbs))
	if id, ok := g.barrierIDs[key]; ok {
		return id
	}
	id := len(g.barrierIDs)
	g.barrierIDs[key] = id
	return id
}

func appendInts(b []byte, xs []int) []byte {
	for _, x := range xs {
		u := uint64(x)
		for i := 0; i < 8; i++ {
			b = append(b, byte(u>>(8*i)))
		}
	}
	return b
}

// RegisterChannel adds the rank-level channel id to the block's table for
// kind t if absent and returns its block-local index (RegCh).
func (g *GPU) RegisterChannel(tb int, t ChannelType, id int) int {
	b := g.TB(tb)
	return registerIndexed(&b.Channels, &b.chPos[t], t, id)
}

// RegisterRemoteBuffer finds or creates the rank-level remote buffer
// (rank, buffer), marks it reachable through kind t, adds it to block tb's
// table for t, and returns the block-local index (RegRB).
func (g *GPU) RegisterRemoteBuffer(tb int, rank int, b BufferType, t ChannelType) int {
	key := rank*numBufferTypes + int(b)
	id := -1
	if key < len(g.rbPos) && g.rbPos[key] > 0 {
		id = int(g.rbPos[key]) - 1
	} else {
		for i := range g.RemoteBuffers {
			if g.RemoteBuffers[i].Rank == rank && g.RemoteBuffers[i].Buffer == b {
				id = i
				break
			}
		}
		if id < 0 {
			g.RemoteBuffers = append(g.RemoteBuffers, RemoteBuffer{Rank: rank, Buffer: b})
			id = len(g.RemoteBuffers) - 1
		}
		g.rbPos = setPos(g.rbPos, key, id)
	}
	switch t {
	case Memory:
		g.RemoteBuffers[id].Memory = true
	case Port:
		g.RemoteBuffers[id].Port = true
	}
	blk := g.TB(tb)
	return registerIndexed(&blk.RemoteRefs, &blk.rbPos[t], t, id)
}

// registerIndexed is register with the position index pos of kind t: a
// hit skips the scan of the table.
func registerIndexed(tables *[]IDTable, pos *[]int32, t ChannelType, id int) int {
	if id < len(*pos) && (*pos)[id] > 0 {
		return int((*pos)[id]) - 1
	}
	j := register(tables, t, id)
	*pos = setPos(*pos, id, j)
	return j
}

// setPos records position j of key k in a position index.
func setPos(pos []int32, k, j int) []int32 {
	for len(pos) <= k {
		pos = append(pos, 0)
	}
	pos[k] = int32(j + 1)
	return pos
}

func register(tables *[]IDTable, t ChannelType, id int) int {
	for i := range *tables {
		tab := &(*tables)[i]
		if tab.Type != t {
			continue
		}
		for j, x := range tab.IDs {
			if x == id {
				return j
			}
		}
		tab.IDs = append(tab.IDs, id)
		return len(tab.IDs) - 1
	}
	*tables = append(*tables, IDTable{Type: t, IDs: []int{id}})
	return 0
}
