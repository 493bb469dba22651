// Package bytesize reads and writes byte counts, in one style for every
// command: Parse reads a count with an optional binary suffix ("64K",
// "1MiB", "4096"), Format and List write exact counts in binary units
// with a space ("1 MiB", "1025 KiB", "1049088 bytes"), never rounded and
// never mixing units on one line.
//
// To start:
//
//	n, err := bytesize.Parse("1M")                 // 1048576
//	fmt.Println(bytesize.Format(n))                // 1 MiB
//	fmt.Println(bytesize.List([]uint64{n, 2 * n})) // 1, 2 MiB
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the binary suffixes Parse accepts, in either case,
// optionally followed by "B" or "iB" ("4K", "4k", "4KB", "4KiB").
var sizeUnits = map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}

// Parse parses a byte count: a decimal number with an optional
// binary suffix K, M, G or T (1K = 1024), optionally followed by B or iB;
// a bare number may end in B. "1M", "1MiB", "1048576" and "1048576B" are
// the same size.
func Parse(s string) (uint64, error) {
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

// units are the units Format and List write, largest first.
var units = []struct {
	shift uint
	name  string
}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}}

// unitOf returns the largest unit that divides every one of sizes
// exactly (a zero size takes none), or shift 0 and "bytes".
func unitOf(sizes []uint64) (uint, string) {
	for _, u := range units {
		all := len(sizes) > 0
		for _, n := range sizes {
			all = all && n != 0 && n%(1<<u.shift) == 0
		}
		if all {
			return u.shift, u.name
		}
	}
	return 0, "bytes"
}

// Format writes n exactly, in the largest binary unit that divides it:
// "1 MiB", "1025 KiB", "1049088 bytes", "0 bytes".
func Format(n uint64) string { return List([]uint64{n}) }

// List writes sizes in one unit, the largest that divides them all, named
// once at the end: "1, 32, 1024 KiB", "128, 16384, 1048576 bytes"; ""
// for no sizes.
func List(sizes []uint64) string {
	if len(sizes) == 0 {
		return ""
	}
	shift, name := unitOf(sizes)
	var b strings.Builder
	for i, n := range sizes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatUint(n>>shift, 10))
	}
	return b.String() + " " + name
}
