package executor

import "fmt"

// FormatBytes prints a byte count in binary units with one decimal
// ("11.7 GiB", "512.0 KiB"), or in bytes below 1 KiB.
func FormatBytes(n uint64) string {
	const units = "KMGTPE"
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[u])
}
