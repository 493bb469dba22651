package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the binary suffixes parseSize accepts, in either case,
// optionally followed by "B" or "iB" ("4K", "4k", "4KB", "4KiB").
var sizeUnits = map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}

// parseSize parses a byte count: a decimal number with an optional
// binary suffix K, M, G or T (1K = 1024), optionally followed by B or iB;
// a bare number may end in B. "1M", "1MiB", "1048576" and "1048576B" are
// the same size.
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size: want a byte count such as 4096, 64K or 1M")
	}
	shift := uint(0)
	upper := strings.ToUpper(t)
	switch {
	case strings.HasSuffix(upper, "IB") && len(t) > 2:
		upper, t = upper[:len(upper)-2], t[:len(t)-2]
		sh, ok := sizeUnits[upper[len(upper)-1]]
		if !ok {
			return 0, fmt.Errorf("size %q: want a unit K, M, G or T before iB", s)
		}
		shift, t = sh, t[:len(t)-1]
	case strings.HasSuffix(upper, "B"):
		upper, t = upper[:len(upper)-1], t[:len(t)-1]
		if t != "" {
			if sh, ok := sizeUnits[upper[len(upper)-1]]; ok {
				shift, t = sh, t[:len(t)-1]
			}
		}
	default:
		if sh, ok := sizeUnits[upper[len(upper)-1]]; ok {
			shift, t = sh, t[:len(t)-1]
		}
	}
	if t == "" || t[0] == '+' || t[0] == '-' {
		return 0, fmt.Errorf("size %q: want a non-negative byte count such as 4096, 64K or 1M", s)
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("size %q does not fit in 64 bits", s)
		}
		return 0, fmt.Errorf("size %q: want a non-negative byte count such as 4096, 64K or 1M", s)
	}
	if n > math.MaxUint64>>shift {
		return 0, fmt.Errorf("size %q does not fit in 64 bits", s)
	}
	return n << shift, nil
}
