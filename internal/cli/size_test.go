package cli

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
			got, err := parseSize(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseSize(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}
