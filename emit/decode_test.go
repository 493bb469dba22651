package emit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
)

// decode_test.go: an independent decoder of the plan text, built on
// encoding/json, from which TestGoldenThroughIR rebuilds the IR of every
// reference plan. (The writer is package plan's, the one encoder.)

// Plan is a decoded MSCCL++ execution plan. Header numbers are
// json.Number so that any magnitude (max_message_size is 2^64-1 by
// default) survives. Decode always yields non-nil slices for lists
// present in the input.
type Plan struct {
	Name                   PyString    `json:"name"`
	Collective             PyString    `json:"collective"`
	Protocol               PyString    `json:"protocol"`
	Inplace                bool        `json:"inplace"`
	ReuseResources         bool        `json:"reuse_resources"`
	GPUs                   []PlanGPU   `json:"gpus"`
	NumThreadsPerBlock     json.Number `json:"num_threads_per_block"`
	UseDoubleScratchBuffer bool        `json:"use_double_scratch_buffer"`
	BufferAlignment        json.Number `json:"buffer_alignment"`
	MinMessageSize         json.Number `json:"min_message_size"`
	MaxMessageSize         json.Number `json:"max_message_size"`
	// AllToAllV is the extension object of alltoallv plans; nil (and
	// absent) in every other plan.
	AllToAllV *PlanAllToAllV `json:"alltoallv,omitempty"`
}

// PlanAllToAllV is the "alltoallv" extension object (docs/executor.md,
// "Variable-size plans").
type PlanAllToAllV struct {
	Version        int `json:"version"`
	Blocks         int `json:"blocks"`
	ChunksPerBlock int `json:"chunks_per_block"`
}

// PlanGPU is one element of "gpus" (docs/plan-format.md §3).
type PlanGPU struct {
	ID            int                `json:"id"`
	InputChunks   int                `json:"input_chunks"`
	OutputChunks  int                `json:"output_chunks"`
	ScratchChunks int                `json:"scratch_chunks"`
	ThreadBlocks  []PlanThreadBlock  `json:"threadblocks"`
	Channels      []PlanChannel      `json:"channels"`
	RemoteBuffers []PlanRemoteBuffer `json:"remote_buffers"`
	Semaphores    []PlanSemaphore    `json:"semaphores,omitzero"`
}

// PlanChannel is a GPU-level channel entry (docs/plan-format.md §3.1): ChannelType
// with ConnectedTo for memory and port channels, or with BufferType and
// RankGroups for switch channels.
type PlanChannel struct {
	ChannelType PyString        `json:"channel_type"`
	ConnectedTo []int           `json:"connected_to,omitzero"`
	BufferType  PyString        `json:"buffer_type,omitzero"`
	RankGroups  []PlanRankGroup `json:"rank_groups,omitzero"`
}

// PlanRankGroup is one rank group of a switch channel entry.
type PlanRankGroup struct {
	Size  int   `json:"size"`
	Ranks []int `json:"ranks"`
}

// PlanRemoteBuffer is an element of "remote_buffers" (docs/plan-format.md §3.2).
type PlanRemoteBuffer struct {
	Rank               int        `json:"rank"`
	Type               PyString   `json:"type"`
	AccessChannelTypes []PyString `json:"access_channel_types"`
}

// PlanSemaphore is an element of "semaphores" (docs/plan-format.md §3.3).
type PlanSemaphore struct {
	InitValue json.Number `json:"init_value"`
}

// PlanThreadBlock is an element of "threadblocks" (docs/plan-format.md §4).
type PlanThreadBlock struct {
	ID               int                   `json:"id"`
	Ops              []PlanOp              `json:"ops"`
	Channels         []PlanTBChannel       `json:"channels"`
	RemoteBufferRefs []PlanRemoteBufferRef `json:"remote_buffer_refs,omitzero"`
}

// PlanTBChannel is an element of a thread block's "channels".
type PlanTBChannel struct {
	ChannelType PyString `json:"channel_type"`
	ChannelIDs  []int    `json:"channel_ids"`
}

// PlanRemoteBufferRef is an element of "remote_buffer_refs".
type PlanRemoteBufferRef struct {
	AccessChannelType PyString `json:"access_channel_type"`
	RemoteBufferIDs   []int    `json:"remote_buffer_ids"`
}

// PlanOp is one op object, any kind (docs/plan-format.md §6–§7). The key list of
// every kind is a subsequence of this field order; absent keys are nil or
// empty and omitted on encoding, while a present empty list is a non-nil
// empty slice and encodes as [].
type PlanOp struct {
	Name            PyString         `json:"name"`
	BarrierID       *int             `json:"barrier_id,omitzero"`
	NumThreadblocks *int             `json:"num_threadblocks,omitzero"`
	SemaphoreIDs    []int            `json:"semaphore_ids,omitzero"`
	IterContext     *PlanIterContext `json:"iter_context,omitzero"`
	Ops             []PlanOp         `json:"ops,omitzero"`
	BufferType      PyString         `json:"buffer_type,omitzero"`
	BufferOffset    *int             `json:"buffer_offset,omitzero"`
	Size            *int             `json:"size,omitzero"`
	DstChunk        *PlanOperand     `json:"dst_chunk,omitzero"`
	SrcBuff         []PlanOperand    `json:"src_buff,omitzero"`
	DstBuff         []PlanOperand    `json:"dst_buff,omitzero"`
	ChannelIDs      []int            `json:"channel_ids,omitzero"`
	ChannelType     PyString         `json:"channel_type,omitzero"`
	ReduceOp        PyString         `json:"reduce_op,omitzero"`
	TBGInfo         *PlanTBGInfo     `json:"tbg_info,omitzero"`
}

// PlanIterContext is a pipeline op's "iter_context".
type PlanIterContext struct {
	UnitSize  int64 `json:"unit_size"`
	NumChunks int64 `json:"num_chunks"`
}

// PlanTBGInfo is an op's "tbg_info".
type PlanTBGInfo struct {
	TBID    int `json:"tb_id"`
	TBGSize int `json:"tbg_size"`
}

// PlanOperand is a buffer operand of any shape (docs/plan-format.md §5): local
// (Type), remote (BufferID), chunk-with-rank (Rank and Type) or switch
// (SwitchChannelID), each with Index and Size.
type PlanOperand struct {
	Rank            *int     `json:"rank,omitzero"`
	Type            PyString `json:"type,omitzero"`
	BufferID        *int     `json:"buffer_id,omitzero"`
	SwitchChannelID *int     `json:"switch_channel_id,omitzero"`
	Index           int      `json:"index"`
	Size            int      `json:"size"`
}

// PyString is a string of the plan text.
type PyString string

// Decode parses a plan. Unknown keys and trailing data are errors, so a
// successful Decode means every key of data has a field in Plan.
func Decode(data []byte) (*Plan, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("emit: decode plan: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("emit: decode plan: data after the plan object")
	}
	return &p, nil
}

// goldenDir holds the reference plans printed by the MSCCL++ Python DSL.
const goldenDir = "../../shared/golden"

// planFiles returns the reference plans and the worked examples of
// docs/plan-format.md §12 (testdata), skipping the test when the golden directory
// is absent.
func planFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(golden) == 0 {
		t.Skipf("no reference plans in %s", goldenDir)
	}
	return append(files, golden...)
}
