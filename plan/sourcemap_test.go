package plan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSourceMap(t *testing.T) {
	tests := []struct {
		name, text string
		err        string // "" when it parses
	}{
		{"ok", `{"version": 1, "plan": "p", "sha256": "ab", "files": ["a.star"], "ops": [{"rank": 0, "tb": 1, "op": "3", "pos": [[0, 12, 5]]}]}`, ""},
		{"no ops", `{"version": 1, "plan": "p", "sha256": "ab", "files": [], "ops": []}`, ""},
		{"not JSON", `{"version": 1,`, "source map: unexpected end of JSON input"},
		{"wrong type", `{"version": "1"}`, "source map: json: cannot unmarshal"},
		{"old version", `{"version": 0, "files": [], "ops": []}`, "source map: version 0, this mscclgo reads version 1"},
		{"new version", `{"version": 2, "files": [], "ops": []}`, "source map: version 2, this mscclgo reads version 1"},
		{"pos file", `{"version": 1, "files": ["a.star"], "ops": [{"op": "0", "pos": [[1, 2, 3]]}]}`, "source map: ops[0]: file index 1 out of range (1 files)"},
		{"stack file", `{"version": 1, "files": ["a.star"], "ops": [{"op": "0", "pos": [[0, 2, 3]]}, {"op": "1", "pos": [[0, 2, 3]], "stack": [[-1, 4, 1]]}]}`, "source map: ops[1]: file index -1 out of range (1 files)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseSourceMap([]byte(tt.text))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("ParseSourceMap: %v", err)
			case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
				t.Fatalf("ParseSourceMap error = %v, want one starting %q", err, tt.err)
			case tt.err == "" && m.Version != SourceMapVersion:
				t.Fatalf("version %d", m.Version)
			}
		})
	}
}

func TestSourceMapPositions(t *testing.T) {
	m := &SourceMap{Files: []string{"algo.star", "lib.star"}}
	tests := []struct {
		name string
		op   SourceOps
		want []string
	}{
		{"one", SourceOps{Pos: [][3]int{{0, 12, 5}}}, []string{"algo.star:12:5"}},
		{"fused", SourceOps{Pos: [][3]int{{0, 12, 5}, {1, 3, 9}}}, []string{"algo.star:12:5", "lib.star:3:9"}},
		{"stack", SourceOps{Pos: [][3]int{{1, 3, 9}, {0, 4, 1}}, Stack: [][3]int{{0, 20, 2}, {0, 30, 1}}},
			[]string{"lib.star:3:9 called from algo.star:20:2, algo.star:30:1", "algo.star:4:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, m.Positions(&tt.op)); diff != "" {
				t.Errorf("Positions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHash(t *testing.T) {
	// The sha256 of "abc" (FIPS 180-2, appendix B.1).
	if got, want := Hash([]byte("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("Hash(abc) = %s, want %s", got, want)
	}
	if got, want := SourceMapPath("out/ar.json"), "out/ar.json.map"; got != want {
		t.Errorf("SourceMapPath = %q, want %q", got, want)
	}
}
