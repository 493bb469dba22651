package planset

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/internal/infile"
	"github.com/mscclgo/mscclgo/plan"
)

// IndexFile is the name of the index written beside an installed plan set.
const IndexFile = "index.json"

// IndexVersion is the format version of IndexFile.
const IndexVersion = 1

// ErrNoIndex is returned when a plan directory has no index.
var ErrNoIndex = errors.New("no plan index")

// Index lists the plans of one directory, for selection at run time.
type Index struct {
	Version int     `json:"version"`
	Plans   []Entry `json:"plans"`
}

// Entry describes one installed plan: what it computes, for which machine
// shape and message sizes, and how it was generated.
type Entry struct {
	// File is the plan's file name, relative to the index's directory.
	File string `json:"file"`
	// Name is the plan's "name".
	Name string `json:"name"`
	// Algorithm and Params say how to regenerate the plan:
	// `mscclgo eval Algorithm -D k=v...`.
	Algorithm    string            `json:"algorithm"`
	Params       map[string]string `json:"params"`
	Collective   string            `json:"collective"`
	WorldSize    int               `json:"world_size"`
	RanksPerNode int               `json:"ranks_per_node"`
	Protocol     string            `json:"protocol"`
	InPlace      bool              `json:"inplace"`
	// MinMessageSize and MaxMessageSize bound the message size (nccl-tests
	// convention: the output size for allgather, the input size otherwise),
	// both inclusive.
	MinMessageSize  uint64 `json:"min_message_size"`
	MaxMessageSize  uint64 `json:"max_message_size"`
	InputChunks     int    `json:"input_chunks"`
	OutputChunks    int    `json:"output_chunks"`
	BufferAlignment uint64 `json:"buffer_alignment"`
	// NVLS is set for plans that use SwitchChannels (NVLink SHARP).
	NVLS bool              `json:"nvls"`
	Tags map[string]string `json:"tags"`
	// Predicted is the predicted time curve and how the size range was
	// set, for a set installed with a hardware profile (install --hw);
	// nil otherwise.
	Predicted *Prediction `json:"predicted,omitempty"`
}

// Prediction is the predicted time curve of an installed plan, and how
// it was predicted.
type Prediction struct {
	// Hardware is the profile's name; Launch "graph" or "kernel"; DType
	// the element type.
	Hardware string `json:"hardware"`
	Launch   string `json:"launch"`
	DType    string `json:"dtype"`
	// Sizes are message sizes and TimesUS the predicted times per call.
	Sizes   []uint64  `json:"sizes"`
	TimesUS []float64 `json:"times_us"`
	// Range says how the entry's size range was set.
	Range string `json:"range"`
}

// MaxIndexBytes bounds the size of an index.json.
const MaxIndexBytes = 64 << 20

// ReadIndex reads the index of the plan directory dir.
func ReadIndex(dir string) (*Index, error) {
	data, err := infile.Read(filepath.Join(dir, IndexFile), "a plan index", MaxIndexBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (run mscclgo install)", dir, ErrNoIndex)
	}
	if err != nil {
		return nil, err
	}
	var idx Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, IndexFile), err)
	}
	if idx.Version != IndexVersion {
		return nil, fmt.Errorf("%s: index version %d, want %d (run mscclgo install again)", filepath.Join(dir, IndexFile), idx.Version, IndexVersion)
	}
	return &idx, nil
}

// Marshal returns the index as indented JSON, plans sorted by file name.
func (idx *Index) Marshal() ([]byte, error) {
	sort.Slice(idx.Plans, func(i, j int) bool { return idx.Plans[i].File < idx.Plans[j].File })
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// ScanDir builds an index for a directory of plan files that has no
// index.json: every *.json plan that loads becomes an entry. A plan file
// says nothing of ranks per node, so each entry assumes one node
// (ranks_per_node = world size); write an index.json to say otherwise.
func ScanDir(dir string) (*Index, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	idx := &Index{Version: IndexVersion}
	for _, f := range files {
		if filepath.Base(f) == IndexFile {
			continue
		}
		plan, err := executor.LoadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		e := NewEntry(plan, len(plan.GPUs), len(plan.GPUs))
		e.File = filepath.Base(f)
		idx.Plans = append(idx.Plans, e)
	}
	if len(idx.Plans) == 0 {
		return nil, fmt.Errorf("%s: %w and no plan files", dir, ErrNoIndex)
	}
	return idx, nil
}

// NewEntry builds the index entry of a loaded plan for a machine of
// worldSize ranks, ranksPerNode per node; the caller sets File and, for a
// generated plan, Algorithm, Params and Tags.
func NewEntry(p *plan.Plan, worldSize, ranksPerNode int) Entry {
	e := Entry{
		Name: p.Name, Collective: p.Collective, WorldSize: worldSize, RanksPerNode: ranksPerNode,
		Protocol: p.Protocol, InPlace: p.Inplace,
		MinMessageSize: p.MinMessageSize, MaxMessageSize: p.MaxMessageSize,
		BufferAlignment: p.BufferAlignment,
	}
	if len(p.GPUs) > 0 {
		e.InputChunks, e.OutputChunks = p.GPUs[0].InputChunks, p.GPUs[0].OutputChunks
	}
	for _, g := range p.GPUs {
		for _, c := range g.Channels {
			e.NVLS = e.NVLS || c.Type == plan.Switch
		}
	}
	return e
}
