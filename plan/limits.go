package plan

// The hard limits of the MSCCL++ executor (docs/semantics.md §1.16): a
// plan beyond them does not load there, so the compiler warns of them
// and the loader rejects them.
const (
	MaxOpsPerTB          = 64 // pipeline records and their nested ops count
	MaxChannelsPerTB     = 16 // per channel type
	MaxChannelIDsPerOp   = 8
	MaxOperandsPerSide   = 10
	MaxSemaphoreIDsPerOp = 16
	MaxBarrierID         = 15
	MaxThreadsPerBlock   = 1024
)

// Limits of mscclgo's plan loader beyond the executor's own: no real plan
// comes near them, and they bound what a hostile plan makes the loader
// and the checks allocate. The DSL keeps its programs within them.
const (
	// MaxRanks bounds a plan's gpus (as the DSL bounds num_ranks).
	MaxRanks = 1 << 16
	// MaxThreadBlocks bounds the thread blocks of a rank: more cannot
	// all be resident on any GPU (an H100 holds 132 SMs × 32 blocks),
	// and the executor's blocks wait on each other.
	MaxThreadBlocks = 1 << 13
)
