package plan

// document.go: the parsed plan, a faithful, validated image of the JSON
// that Load reads and Check validates.

// Plan is a loaded execution plan.
type Plan struct {
	Name               string
	Collective         string
	Protocol           string // "Simple" or "LL"
	Inplace            bool
	ReuseResources     bool
	UseDoubleScratch   bool
	NumThreadsPerBlock int
	BufferAlignment    uint64
	MinMessageSize     uint64
	MaxMessageSize     uint64
	GPUs               []GPU
	// AllToAllV is the layout of a variable-size plan (collective
	// "alltoallv", loadv.go); nil for every other plan.
	AllToAllV *VarLayout
	// SourceNote says why a source map beside the plan file was not used
	// (LoadFile); "" when there is none or it was attached.
	SourceNote string
}

// GPU is one rank of a plan.
type GPU struct {
	ID                                       int
	InputChunks, OutputChunks, ScratchChunks int
	ThreadBlocks                             []ThreadBlock
	Channels                                 []ChannelDecl
	RemoteBuffers                            []RemoteBuffer
	Semaphores                               []int64 // initial values
}

// ChannelDecl is one entry of a rank's "channels": memory/port channels to
// the peers of ConnectedTo, or one switch channel per rank group.
type ChannelDecl struct {
	Type        ChannelType
	ConnectedTo []int      // memory, port
	Buffer      BufferType // switch
	RankGroups  [][]int    // switch: the ranks of each group
}

// RemoteBuffer is a buffer of another rank reached through channels.
type RemoteBuffer struct {
	Rank   int
	Type   BufferType
	Access []ChannelType // memory and/or port
}

// ThreadBlock is one thread block of one rank.
type ThreadBlock struct {
	ID         int
	Ops        []Op
	Channels   map[ChannelType][]int // TB-local index -> rank-level (global) index
	RemoteRefs map[ChannelType][]int // TB-local buffer_id -> rank-level remote buffer index
	// ChannelOrder and RemoteRefOrder are the channel types of the
	// entries of "channels" and "remote_buffer_refs", each once, in the
	// order the plan lists them (Encode writes them in that order).
	ChannelOrder, RemoteRefOrder []ChannelType
}

// OperandKind says how an operand addresses memory.
type OperandKind uint8

// The operand kinds.
const (
	LocalOperand  OperandKind = iota // {type, index, size}
	RemoteOperand                    // {buffer_id, index, size}
	SwitchOperand                    // {switch_channel_id, index, size}
)

// Operand is one src_buff or dst_buff entry, in chunk units.
type Operand struct {
	Kind     OperandKind
	Type     BufferType // LocalOperand
	BufferID int        // RemoteOperand: TB-local remote buffer index
	SwitchID int        // SwitchOperand: TB-local switch channel index
	Index    uint64
	Size     uint64
	// Rank is the owner the DSL writes into a switch store's source
	// chunk ({rank, type, index, size}) and glre's dst_chunk; HasRank
	// says the operand has one.
	Rank    int
	HasRank bool
}

// TBGInfo is the thread-block-group position of an op.
type TBGInfo struct {
	TBID, TBGSize int
}

// Op is one op of a thread block.
type Op struct {
	Type            OpType
	ChannelType     ChannelType
	ChannelIDs      []int // TB-local indices of ChannelType
	Src, Dst        []Operand
	TBG             *TBGInfo
	BarrierID       int
	NumThreadBlocks int
	SemaphoreIDs    []int
	// ReduceOp is the plan's "reduce_op" ("sum", "min", "max"), "" when
	// the op has none. The executor reduces with the run's operation; it
	// is kept so that the plan is written back as it was read.
	ReduceOp  string
	UnitSize  uint64 // pipeline
	NumChunks uint64 // pipeline
	Ops       []Op   // pipeline body
	// Source are the .star positions that recorded the op ("algo.star:12:5"),
	// from the plan's source map; nil without one.
	Source []string
}

// SwitchGroup is one NVLS multicast group.
type SwitchGroup struct {
	Buffer BufferType
	Ranks  []int
}
