package main

// colls.go: the collectives of NCCL 2.28 (ncclAlltoAll, ncclGather,
// ncclScatter), as the Go side names them. mscclgo runs no plan for them
// (their calls go to the fallback NCCL, or are refused without one); the
// checks of checks.go size their buffers and check their root.

/*
#include "shim.h"
*/
import "C"

const (
	collAllToAll collective = collRecv + 1 + iota
	collGather
	collScatter
)

// The values are enum mscclgo_coll's (shim.h): a mismatch does not
// compile (a negative constant converted to uint).
const (
	_ = uint(int(collAllToAll)-C.MSCCLGO_ALLTOALL) + uint(C.MSCCLGO_ALLTOALL-int(collAllToAll))
	_ = uint(int(collGather)-C.MSCCLGO_GATHER) + uint(C.MSCCLGO_GATHER-int(collGather))
	_ = uint(int(collScatter)-C.MSCCLGO_SCATTER) + uint(C.MSCCLGO_SCATTER-int(collScatter))
)

// rooted reports whether the collective has a root rank (its call's
// peer).
func (c collective) rooted() bool {
	return c == collBroadcast || c == collReduce || c == collGather || c == collScatter
}
