package planset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testIndex() *Index {
	const maxU64 = ^uint64(0)
	return &Index{Version: IndexVersion, Plans: []Entry{
		{File: "ar_pkt_8.json", Name: "allreduce_packet_8", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "LL",
			InPlace: true, MinMessageSize: 0, MaxMessageSize: 1 << 20, InputChunks: 8, OutputChunks: 8, BufferAlignment: 16},
		{File: "ar_rsag_8.json", Name: "allreduce_rsag_8", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "Simple",
			InPlace: true, MinMessageSize: 1 << 20, MaxMessageSize: maxU64, InputChunks: 64, OutputChunks: 64, BufferAlignment: 16},
		{File: "ar_nvls_8.json", Name: "allreduce_nvls_8", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "Simple",
			InPlace: true, MinMessageSize: 1 << 20, MaxMessageSize: 1 << 30, InputChunks: 8, OutputChunks: 8, BufferAlignment: 16, NVLS: true},
		{File: "ar_pkt_16.json", Name: "allreduce_hier_packet_16", Collective: "allreduce", WorldSize: 16, RanksPerNode: 8, Protocol: "LL",
			InPlace: true, MinMessageSize: 0, MaxMessageSize: 1 << 16, InputChunks: 16, OutputChunks: 16, BufferAlignment: 16},
		{File: "ag_8.json", Name: "allgather_8", Collective: "allgather", WorldSize: 8, RanksPerNode: 8, Protocol: "Simple",
			InPlace: false, MinMessageSize: 0, MaxMessageSize: maxU64, InputChunks: 1, OutputChunks: 8, BufferAlignment: 16},
	}}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	defaults := []Source{{Dir: "default", Index: testIndex()}}
	user := &Index{Version: IndexVersion, Plans: []Entry{
		{File: "mine.json", Name: "my_allreduce", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "LL",
			InPlace: true, MinMessageSize: 0, MaxMessageSize: 1 << 12, InputChunks: 8, OutputChunks: 8, BufferAlignment: 16},
	}}
	tests := []struct {
		name    string
		sources []Source
		req     Request
		want    string // chosen plan name, or "" for no plan
		reason  string // a rejection reason that must be reported
	}{
		{"small allreduce", defaults, Request{"allreduce", 8, 8, 4096, true, 2, false, false}, "allreduce_packet_8", ""},
		{"large allreduce without NVLS", defaults, Request{"allreduce", 8, 8, 64 << 20, true, 2, false, false}, "allreduce_rsag_8",
			"needs NVLS, which is not available"},
		{"large allreduce with NVLS prefers the narrower range", defaults, Request{"allreduce", 8, 8, 64 << 20, true, 2, true, false}, "allreduce_nvls_8", ""},
		{"never another world size", defaults, Request{"allreduce", 4, 4, 4096, true, 2, false, false}, "", "built for 8 ranks, not 4"},
		{"multi-node shape", defaults, Request{"allreduce", 16, 8, 4096, true, 2, false, false}, "allreduce_hier_packet_16", ""},
		{"ranks per node must match", defaults, Request{"allreduce", 16, 4, 4096, true, 2, false, false}, "", "built for 8 ranks per node, not 4"},
		{"never an in-place plan for an out-of-place call", defaults, Request{"allreduce", 8, 8, 4096, false, 2, false, false}, "",
			"in-place plan for an out-of-place call"},
		{"out-of-place allgather", defaults, Request{"allgather", 8, 8, 8 << 10, false, 2, false, false}, "allgather_8", ""},
		{"size that does not divide into chunks", defaults, Request{"allreduce", 8, 8, 16 * 7, true, 2, false, false}, "",
			"not divisible into 8 chunks"},
		{"user directory first", append([]Source{{Dir: "mine", Index: user}}, defaults...), Request{"allreduce", 8, 8, 2048, true, 2, false, false}, "my_allreduce", ""},
		{"host memory: Simple from 16 KiB, whatever the ranges", defaults, Request{"allreduce", 8, 8, 256 << 10, true, 2, false, true}, "allreduce_rsag_8",
			"costs less on the CPU backend"},
		{"host memory: LL packets for the smallest", defaults, Request{"allreduce", 8, 8, 1 << 10, true, 2, false, true}, "allreduce_packet_8",
			"costs less on the CPU backend"},
		{"host memory: LL beyond its range where nothing else fits", defaults, Request{"allreduce", 16, 8, 4 << 20, true, 2, false, true}, "allreduce_hier_packet_16", ""},
		{"user directory without a fit falls back", append([]Source{{Dir: "mine", Index: user}}, defaults...), Request{"allreduce", 8, 8, 1 << 16, true, 2, false, false},
			"allreduce_packet_8", "outside [0, 4096]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Select(tt.sources, tt.req)
			if tt.want == "" {
				if !errors.Is(err, ErrNoPlan) {
					t.Fatalf("got %v, %v; want no plan", c, err)
				}
			} else if err != nil || c.Entry.Name != tt.want {
				t.Fatalf("got %+v, %v; want %s", c, err, tt.want)
			}
			if tt.reason != "" {
				found := false
				for _, r := range c.Rejected {
					found = found || strings.Contains(r.Reason, tt.reason)
				}
				if !found {
					t.Errorf("no rejection reason contains %q: %+v", tt.reason, c.Rejected)
				}
			}
		})
	}
}

func TestScanDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := ScanDir(dir); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("empty dir: got %v, want ErrNoIndex", err)
	}
	data, err := os.ReadFile("../tests/ports/unit_tests/copy_test.plan.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "copy.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := ScanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Plans) != 1 || idx.Plans[0].File != "copy.json" || idx.Plans[0].WorldSize != 1 || idx.Plans[0].RanksPerNode != 1 {
		t.Errorf("index = %+v", idx.Plans)
	}
}

// TestSelectPlaceOnly marks the rejected plans whose only mismatch is the
// in-place mode, and only those.
func TestSelectPlaceOnly(t *testing.T) {
	t.Parallel()
	defaults := []Source{{Dir: "default", Index: testIndex()}}
	tests := []struct {
		name string
		req  Request
		want []string // the plans marked PlaceOnly
	}{
		{"out-of-place small allreduce", Request{"allreduce", 8, 8, 4096, false, 2, false, false}, []string{"allreduce_packet_8"}},
		{"out-of-place large allreduce with NVLS", Request{"allreduce", 8, 8, 64 << 20, false, 2, true, false}, []string{"allreduce_rsag_8", "allreduce_nvls_8"}},
		{"out-of-place large allreduce without NVLS", Request{"allreduce", 8, 8, 64 << 20, false, 2, false, false}, []string{"allreduce_rsag_8"}},
		{"in-place allgather", Request{"allgather", 8, 8, 8 << 10, true, 2, false, false}, []string{"allgather_8"}},
		{"in-place allgather of a bad size", Request{"allgather", 8, 8, 8*16 + 8, true, 2, false, false}, nil},
		{"in-place call that fits", Request{"allreduce", 8, 8, 4096, true, 2, false, false}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := Select(defaults, tt.req)
			var got []string
			for _, r := range c.Rejected {
				if r.PlaceOnly {
					got = append(got, r.Entry.Name)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("PlaceOnly plans %v, want %v", got, tt.want)
			}
		})
	}
}
