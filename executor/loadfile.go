package executor

// loadfile.go reads plan files with the process's limits: the checked
// opener of internal/infile and the memory left under internal/memlimit.
// The format itself (plan.Load, plan.Check) is package plan's.

import (
	"fmt"

	"github.com/mscclgo/mscclgo/internal/infile"
	"github.com/mscclgo/mscclgo/internal/memlimit"
	"github.com/mscclgo/mscclgo/plan"
)

// LoadFile reads and loads a plan file, with the positions of its source
// map (PLAN.json.map) when one is there and belongs to it (see
// LoadSourceMap; Plan.SourceNote says why one was not used).
func LoadFile(path string) (*plan.Plan, error) {
	data, err := ReadPlanFile(path)
	if err != nil {
		return nil, err
	}
	p, err := plan.Load(data)
	if err != nil {
		return nil, err
	}
	p.SourceNote = LoadSourceMap(p, path, data)
	return p, nil
}

// MaxPlanBytes bounds the size of a plan file (a 128-rank allreduce plan
// has about 56 MB).
const MaxPlanBytes = 1 << 30

// ReadPlanFile reads a plan file through the checked opener: a FIFO, a
// device or a file above MaxPlanBytes is refused with a named error.
func ReadPlanFile(path string) ([]byte, error) {
	return ReadPlan(path, "a plan (.json)")
}

// ReadPlan is ReadPlanFile with what the file is wanted as named in its
// errors. A plan whose loading would need more memory than this process
// may still use (memlimit) is refused before it is read.
func ReadPlan(path, what string) ([]byte, error) {
	f, err := infile.Open(path, what, MaxPlanBytes)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, err
	}
	if h := memlimit.Now(); h.What != "" {
		need := uint64(st.Size()) * loadFactor
		if left := h.Bytes - min(h.Bytes, loadReserve); need > left {
			return nil, fmt.Errorf("%s has %d bytes: loading a plan takes about %d times its size, %s, more than the %s this process may still use less %s for the rest (bounded by %s)",
				path, st.Size(), loadFactor, FormatBytes(need), FormatBytes(h.Bytes), FormatBytes(loadReserve), h.What)
		}
	}
	return infile.Read(path, what, MaxPlanBytes)
}

// loadFactor bounds the memory the loader takes per byte of plan: the
// bytes read, the strings and numbers decoded from them, and the parsed
// plan.
const loadFactor = 4

// loadReserve is the memory left aside for everything but the load.
const loadReserve = 512 << 20
