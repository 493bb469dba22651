package bytesize

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want uint64
		err  string
	}{
		{in: "0", want: 0},
		{in: "4096", want: 4096},
		{in: "4096B", want: 4096},
		{in: "1K", want: 1024},
		{in: "1k", want: 1024},
		{in: "64KB", want: 64 << 10},
		{in: "64KiB", want: 64 << 10},
		{in: "1M", want: 1 << 20},
		{in: "1mib", want: 1 << 20},
		{in: "3G", want: 3 << 30},
		{in: "2T", want: 2 << 40},
		{in: " 8M ", want: 8 << 20},
		{in: "18446744073709551615", want: 1<<64 - 1},
		{in: "", err: "empty size"},
		{in: "K", err: "want a non-negative byte count"},
		{in: "B", err: "want a non-negative byte count"},
		{in: "KiB", err: "want a non-negative byte count"},
		{in: "-1", err: "want a non-negative byte count"},
		{in: "+1", err: "want a non-negative byte count"},
		{in: "1.5M", err: "want a non-negative byte count"},
		{in: "1Q", err: "want a non-negative byte count"},
		{in: "1QiB", err: "want a unit K, M, G or T before iB"},
		{in: "1 M", err: "want a non-negative byte count"},
		{in: "16777216T", err: "does not fit in 64 bits"},
		{in: "18446744073709551616", err: "does not fit in 64 bits"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFormatList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sizes []uint64
		want  string
	}{
		{[]uint64{1049088, 1025 << 10}, "1049088, 1049600 bytes"},
		{[]uint64{128, 16 << 10, 1 << 20}, "128, 16384, 1048576 bytes"},
		{[]uint64{1 << 10, 32 << 10, 1 << 20}, "1, 32, 1024 KiB"},
		{[]uint64{2 << 20, 4 << 20}, "2, 4 MiB"},
		{[]uint64{1 << 30}, "1 GiB"},
		{[]uint64{3 << 40}, "3 TiB"},
		{[]uint64{0, 1 << 10}, "0, 1024 bytes"},
		{[]uint64{0}, "0 bytes"},
		{[]uint64{1025 << 10}, "1025 KiB"},
		{nil, ""},
	} {
		if got := List(tc.sizes); got != tc.want {
			t.Errorf("List(%v) = %q, want %q", tc.sizes, got, tc.want)
		}
		if len(tc.sizes) == 1 {
			if got := Format(tc.sizes[0]); got != tc.want {
				t.Errorf("Format(%d) = %q, want %q", tc.sizes[0], got, tc.want)
			}
			// What Format writes, Parse reads back.
			text := strings.ReplaceAll(tc.want, " bytes", "")
			if n, err := Parse(strings.ReplaceAll(text, " ", "")); err != nil || n != tc.sizes[0] {
				t.Errorf("Parse(%q) = %d, %v; want %d", text, n, err, tc.sizes[0])
			}
		}
	}
}
