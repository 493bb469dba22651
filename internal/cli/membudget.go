package cli

// membudget.go holds the memory budget of `mscclgo run`: by default half
// of the machine's memory (MemTotal of /proc/meminfo, or the cgroup's
// limit when lower), which --max-memory replaces, and the refusal of a
// run whose estimated memory use (executor.EstimateMemory) is above it.

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/internal/memlimit"
)

// fallbackBudget is the budget when the machine's memory cannot be read.
const fallbackBudget = 8 << 30

// memoryBudget is the budget of a run and where it comes from.
type memoryBudget struct {
	bytes uint64 // 0: no budget
	why   string // "half of this machine's 23.5 GiB", "--max-memory"
}

// runBudget returns the budget --max-memory gives, or the default.
func runBudget(flag string, set bool) (memoryBudget, error) {
	if set {
		n, err := parseSize(flag)
		if err != nil {
			return memoryBudget{}, usageErr("--max-memory: %v", err)
		}
		return memoryBudget{bytes: n, why: "--max-memory"}, nil
	}
	total, src := machineMemory(os.DirFS("/"))
	b := memoryBudget{bytes: total / 2, why: "half of " + src}
	if total == 0 {
		b = memoryBudget{bytes: fallbackBudget, why: "the default when the machine's memory cannot be read"}
	}
	// What the process may really still use (an address-space limit,
	// the cgroup's usage, the free memory) may be less; a quarter of it
	// is left to the Go runtime and what the estimate does not count.
	if h := memlimit.Now(); h.What != "" && h.Bytes-h.Bytes/4 < b.bytes {
		b = memoryBudget{bytes: h.Bytes - h.Bytes/4, why: "three quarters of what this process may still use, bounded by " + h.What}
	}
	return b, nil
}

// machineMemory returns the memory this process may use, read under
// fsys (the root file system): MemTotal of /proc/meminfo, or the cgroup
// limit (v2 memory.max, v1 memory.limit_in_bytes) when lower; 0 when
// neither can be read. The string says which it is.
func machineMemory(fsys fs.FS) (uint64, string) {
	total, src := uint64(0), ""
	if data, err := fs.ReadFile(fsys, "proc/meminfo"); err == nil {
		if kb, ok := memTotalKB(data); ok && kb > 0 && kb < 1<<54 {
			total, src = kb<<10, "this machine's "+executor.FormatBytes(kb<<10)
		}
	}
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		lim, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || lim == 0 { // "max": no limit
			continue
		}
		if total == 0 || lim < total {
			total, src = lim, "the cgroup memory limit of "+executor.FormatBytes(lim)
		}
	}
	return total, src
}

// memTotalKB reads the MemTotal line of /proc/meminfo, in kB.
func memTotalKB(data []byte) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// memoryError is a run refused for its memory: it ends a sweep.
type memoryError struct{ msg string }

func (e *memoryError) Error() string { return e.msg }

// checkBudget refuses a run of size whose estimated use is above b.
func checkBudget(path string, size uint64, use executor.MemoryUse, b memoryBudget) error {
	if b.bytes == 0 || use.Total() <= b.bytes {
		return nil
	}
	return &memoryError{fmt.Sprintf("%s: size %d: a run needs about %s (%s), above the memory budget of %s (%s); --max-memory raises it",
		path, size, executor.FormatBytes(use.Total()), use, executor.FormatBytes(b.bytes), b.why)}
}
