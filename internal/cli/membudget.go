package cli

// membudget.go holds the memory budget of `mscclgo run`: by default half
// of the machine's memory (MemTotal of /proc/meminfo, or the cgroup's
// limit when lower), which --max-memory replaces, and the refusal of a
// run whose estimated memory use (harness.EstimateMemory) is above it.

import (
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/bytesize"
)

// memoryBudget is the budget of a run and where it comes from.
type memoryBudget struct {
	bytes uint64 // 0: no budget
	why   string // "half of this machine's 23.5 GiB", "--max-memory"
}

// runBudget returns the budget --max-memory gives, or the default.
func runBudget(flag string, set bool) (memoryBudget, error) {
	if set {
		n, err := bytesize.Parse(flag)
		if err != nil {
			return memoryBudget{}, usageErr("--max-memory: %v", err)
		}
		return memoryBudget{bytes: n, why: "--max-memory"}, nil
	}
	bytes, why := harness.DefaultBudget()
	return memoryBudget{bytes: bytes, why: why}, nil
}

// memoryError is a run refused for its memory: it ends a sweep.
type memoryError struct{ msg string }

func (e *memoryError) Error() string { return e.msg }

// checkBudget refuses a run of size whose estimated use is above b.
func checkBudget(path string, size uint64, use harness.MemoryUse, b memoryBudget) error {
	if b.bytes == 0 || use.Total() <= b.bytes {
		return nil
	}
	return &memoryError{fmt.Sprintf("%s: size %d: a run needs about %s (%s), above the memory budget of %s (%s); --max-memory raises it",
		path, size, executor.FormatBytes(use.Total()), use, executor.FormatBytes(b.bytes), b.why)}
}
