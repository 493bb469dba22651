package plan

import "fmt"

// OpType is an op that an executor runs: one of the names MSCCL++'s
// loader accepts (docs/plan-format.md §6).
type OpType uint8

// The op types, in the order the GPU kernel's layout numbers them
// (csrc/mscclgo/layout.h).
const (
	OpNop OpType = iota
	OpBarrier
	OpSignal
	OpRelaxedSignal
	OpWait
	OpRelaxedWait
	OpFlush
	OpSemAcquire
	OpSemRelease
	OpCopy
	OpCopyPacket
	OpUnpackPacket
	OpGet
	OpPut
	OpPutWithSignal
	OpPutWithSignalAndFlush
	OpPutPacket
	OpReadPutPacket
	OpReduce
	OpReduceSend
	OpReadReduce
	OpReadReduceSend
	OpReducePacket
	OpReduceSendPacket
	OpReduceCopyPacket
	OpReduceCopySendPacket
	OpMultiLoadReduceStore
	OpMultiStore
	OpMultiStorePacket
	OpPipeline

	// NumOpTypes is the number of op types.
	NumOpTypes
)

// GroupLoadReduceName is the name the DSL writes for a switch
// load-reduce that found no store to fuse with. MSCCL++'s loader
// rejects it (only the fusion, OpMultiLoadReduceStore, runs), so it is
// a spelling of the format but no OpType.
const GroupLoadReduceName = "glre"

// opNames are the plan names, indexed by OpType.
var opNames = [NumOpTypes]string{
	OpNop:                   "nop",
	OpBarrier:               "barrier",
	OpSignal:                "signal",
	OpRelaxedSignal:         "rlxsignal",
	OpWait:                  "wait",
	OpRelaxedWait:           "rlxwait",
	OpFlush:                 "flush",
	OpSemAcquire:            "sem_acquire",
	OpSemRelease:            "sem_release",
	OpCopy:                  "copy",
	OpCopyPacket:            "cpkt",
	OpUnpackPacket:          "upkt",
	OpGet:                   "get",
	OpPut:                   "put",
	OpPutWithSignal:         "pws",
	OpPutWithSignalAndFlush: "pwsf",
	OpPutPacket:             "ppkt",
	OpReadPutPacket:         "rppkt",
	OpReduce:                "re",
	OpReduceSend:            "res",
	OpReadReduce:            "rre",
	OpReadReduceSend:        "rres",
	OpReducePacket:          "repkt",
	OpReduceSendPacket:      "respkt",
	OpReduceCopyPacket:      "recpkt",
	OpReduceCopySendPacket:  "recspkt",
	OpMultiLoadReduceStore:  "glres",
	OpMultiStore:            "gstore",
	OpMultiStorePacket:      "gstorepkt",
	OpPipeline:              "pipeline",
}

// String returns the plan name.
func (o OpType) String() string {
	if o < NumOpTypes {
		return opNames[o]
	}
	return fmt.Sprintf("OpType(%d)", uint8(o))
}

// ParseOpType returns the op type of a plan name; it is false for
// GroupLoadReduceName as for any other name MSCCL++ does not load.
func ParseOpType(name string) (OpType, bool) {
	for i, n := range opNames {
		if n == name {
			return OpType(i), true
		}
	}
	return 0, false
}
