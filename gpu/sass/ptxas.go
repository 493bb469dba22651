package sass

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Resources is what `ptxas -v` reports for one function.
type Resources struct {
	Arch        string
	Name        string
	Registers   int // 0 where ptxas printed no "Used N registers" line for it
	Stack       int // bytes of stack frame
	SpillStores int // bytes
	SpillLoads  int // bytes
}

// Key names a function of one architecture.
type Key struct{ Arch, Name string }

var (
	reCompiling = regexp.MustCompile(`Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)'`)
	reFunction  = regexp.MustCompile(`Function properties for (\S+)`)
	reFrame     = regexp.MustCompile(`^(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reUsed      = regexp.MustCompile(`Used (\d+) registers`)
)

// ParsePtxas reads the stderr of `nvcc -Xptxas -v` (file names it in
// errors; arch is the architecture of functions no "Compiling entry
// function ... for 'sm_NN'" line names, e.g. "sm_90" for ptxas-sm90.log).
func ParsePtxas(file, arch, text string) (map[Key]Resources, error) {
	res := map[Key]Resources{}
	cur := ""   // the function of the last "Function properties" line
	entry := "" // the entry of the last "Compiling entry function" line
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if m := reCompiling.FindStringSubmatch(s); m != nil {
			entry, arch = m[1], m[2]
			continue
		}
		if m := reFunction.FindStringSubmatch(s); m != nil {
			cur = m[1]
			continue
		}
		if m := reFrame.FindStringSubmatch(s); m != nil {
			if cur == "" {
				return nil, fmt.Errorf("%s:%d: a stack frame line before any \"Function properties\" line: %q", file, line, s)
			}
			k := Key{arch, cur}
			r := res[k]
			r.Arch, r.Name = arch, cur
			r.Stack, _ = strconv.Atoi(m[1])
			r.SpillStores, _ = strconv.Atoi(m[2])
			r.SpillLoads, _ = strconv.Atoi(m[3])
			res[k] = r
			cur = ""
			continue
		}
		if m := reUsed.FindStringSubmatch(s); m != nil && entry != "" {
			k := Key{arch, entry}
			r := res[k]
			r.Arch, r.Name = arch, entry
			r.Registers, _ = strconv.Atoi(m[1])
			res[k] = r
			entry = ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return res, nil
}
