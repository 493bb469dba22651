package topo

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden link tables in testdata/")

func mustHW(t *testing.T, name string) *HW {
	t.Helper()
	hw, err := LoadHW(name)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

// TestLinksGolden prints the link table of every bundled example on its
// profile and compares it with testdata/NAME.links.
func TestLinksGolden(t *testing.T) {
	for _, tc := range []struct {
		example, hw string
		nodes       int
	}{
		{"dgx1-v100", "v100-sxm2", 1},
		{"pcie-2socket", "a100-pcie", 1},
		{"dgx-h100", "h100-sxm", 1},
		{"dgx-h100-nv12", "h100-sxm", 1},
		{"dgx-h100", "h100-sxm", 2},
	} {
		name := tc.example
		if tc.nodes > 1 {
			name += "-x" + string(rune('0'+tc.nodes))
		}
		t.Run(name, func(t *testing.T) {
			tp, err := Load(tc.example, mustHW(t, tc.hw))
			if err != nil {
				t.Fatal(err)
			}
			if tp, err = Replicate(tp, tc.nodes); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := tp.WriteLinks(&buf); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".links")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./topo -update)", err)
			}
			if !bytes.Equal(want, buf.Bytes()) {
				t.Errorf("link table of %s differs from %s (go test ./topo -update rewrites it)", name, golden)
			}
		})
	}
}

// TestBounds checks the cut bounds against hand-computed values.
func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		example, hw string
		nodes       int
		agAlgBW     float64
	}{
		// Each GPU receives 7/8 of the output over its 6 NVLinks (6 x 25 x
		// 0.8 = 120 GB/s) and its PCIe link (15.75 x 0.8).
		{"dgx1-v100", "v100-sxm2", 1, (120 + 12.6) * 8 / 7},
		// Each GPU's PCIe link, 31.5 x 0.8.
		{"pcie-2socket", "a100-pcie", 1, 25.2 * 8 / 7},
		// NVSwitch: 18 x 25 x 0.822 into each GPU.
		{"dgx-h100", "h100-sxm", 1, 369.9 * 8 / 7},
		// The GPU with 12 ports: 12 x 25 x 0.822.
		{"dgx-h100-nv12", "h100-sxm", 1, 246.6 * 8 / 7},
		// Two nodes: each GPU receives 15 of 16 shards over its NVSwitch
		// ports and its NIC (50 x 0.94); the node's cut (8 NICs for 8
		// shards) is looser.
		{"dgx-h100", "h100-sxm", 2, (369.9 + 47) * 16 / 15},
	} {
		t.Run(tc.example, func(t *testing.T) {
			tp, err := Load(tc.example, mustHW(t, tc.hw))
			if err != nil {
				t.Fatal(err)
			}
			if tp, err = Replicate(tp, tc.nodes); err != nil {
				t.Fatal(err)
			}
			ag, rs := tp.AllGatherBound(), tp.ReduceScatterBound()
			if got := ag.AlgBW(tp.NumGPUs()); math.Abs(got-tc.agAlgBW) > 1e-6*tc.agAlgBW {
				t.Errorf("allgather bound %g GB/s, want %g (cut %v)", got, tc.agAlgBW, ag.Cut)
			}
			if math.Abs(ag.Rate-rs.Rate) > 1e-9*ag.Rate {
				t.Errorf("reduce-scatter bound %g, allgather %g: the links are symmetric", rs.Rate, ag.Rate)
			}
		})
	}
}

// TestBoundOneWay: a directed ring's bound is its link rate.
func TestBoundOneWay(t *testing.T) {
	js := `{"vertices": [{"name": "gpu0", "kind": "gpu"}, {"name": "gpu1", "kind": "gpu"}, {"name": "gpu2", "kind": "gpu"}],
"links": [{"from": "gpu0", "to": "gpu1", "type": "nvlink", "both": false}, {"from": "gpu1", "to": "gpu2", "type": "nvlink", "both": false},
{"from": "gpu2", "to": "gpu0", "type": "nvlink", "both": false}]}`
	tp, err := Parse("ring.json", []byte(js), mustHW(t, "v100-sxm2"))
	if err != nil {
		t.Fatal(err)
	}
	// Each GPU receives 2 shards over one 20 GB/s link: algbw 30.
	if got := tp.AllGatherBound().AlgBW(3); math.Abs(got-30) > 1e-6 {
		t.Errorf("ring bound %g, want 30", got)
	}
	if tp.Reach(0, 2) || !tp.Reach(0, 1) {
		t.Errorf("gpu0 reaches gpu2 without gpu1, or not gpu1")
	}
}

// TestBadInput: errors name the file, the line and the value.
func TestBadInput(t *testing.T) {
	hw := mustHW(t, "v100-sxm2")
	for _, tc := range []struct{ name, data, want string }{
		{"cell", "\tGPU0\tGPU1\nGPU0\t X \tNV9x\nGPU1\tNV1\t X \n", `m.txt:2: GPU0 to GPU1: unknown cell "NV9x"`},
		{"short row", "\tGPU0\tGPU1\nGPU0\t X \nGPU1\tNV1\t X \n", "m.txt:2: row GPU0 has 1 cells, want 2"},
		{"asymmetric", "\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tNV2\t X \n", "m.txt:2: GPU0 to GPU1 is NV1, but GPU1 to GPU0 is NV2"},
		{"too many links", "\tGPU0\tGPU1\nGPU0\t X \tNV7\nGPU1\tNV7\t X \n", "m.txt:2: GPU0 has 7 NVLinks in its row, but a v100-sxm2 GPU has 6"},
		{"header", "foo\n", "m.txt:1: want the header row"},
		{"json kind", "{\"vertices\": [\n{\"name\": \"gpu0\", \"kind\": \"tpu\"}]}", `m.json:2: vertex "gpu0": kind "tpu"`},
		{"json gpu name", "{\"vertices\": [\n{\"name\": \"g0\", \"kind\": \"gpu\"}]}", `m.json:2: GPU "g0": GPUs are named gpu0`},
		{"json link", "{\"vertices\": [{\"name\": \"gpu0\", \"kind\": \"gpu\"}],\n\"links\": [\n{\"from\": \"gpu0\", \"to\": \"sw\", \"type\": \"nvlink\"}]}", `m.json:3: link gpu0 -> sw: no vertex "sw"`},
		{"json syntax", "{\"vertices\": [\n}", "m.json:2:"},
		{"no route", "{\"vertices\": [{\"name\": \"gpu0\", \"kind\": \"gpu\"}, {\"name\": \"gpu1\", \"kind\": \"gpu\"}]}", "no route from gpu0 to gpu1, even through other GPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := "m.txt"
			if strings.HasPrefix(tc.data, "{") {
				file = "m.json"
			}
			_, err := Parse(file, []byte(tc.data), hw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := Load("nosuch", hw); err == nil || !strings.Contains(err.Error(), "dgx1-v100") {
		t.Errorf("unknown topology: %v", err)
	}
	if _, err := LoadHW("tpu"); err == nil || !strings.Contains(err.Error(), "a100-pcie, h100-sxm, v100-sxm2") {
		t.Errorf("unknown profile: %v", err)
	}
}

// TestRoutes: routes avoid GPUs and take NVLink where there is one.
func TestRoutes(t *testing.T) {
	tp, err := Load("dgx1-v100", mustHW(t, "v100-sxm2"))
	if err != nil {
		t.Fatal(err)
	}
	if r := tp.Route(0, 3); len(r) != 1 || tp.Links[r[0]].Kind != NVLink || tp.Links[r[0]].GBps != 40 {
		t.Errorf("route gpu0 -> gpu3: %v, want the NV2 link", r)
	}
	// gpu0 and gpu5 have no NVLink: PCIe, both CPUs and QPI.
	var names []string
	for _, li := range tp.Route(0, 5) {
		names = append(names, tp.Vertices[tp.Links[li].To].Name)
	}
	if got := strings.Join(names, " "); got != "pcie0 cpu0 cpu1 pcie2 gpu5" {
		t.Errorf("route gpu0 -> gpu5 through %s", got)
	}
}
