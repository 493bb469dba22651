package executor

import "testing"

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{
		0: "0 bytes", 1023: "1023 bytes", 1024: "1.0 KiB", 1536: "1.5 KiB", 12566 << 20: "12.3 GiB",
		1 << 40: "1.0 TiB", 1<<64 - 1: "16.0 EiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
