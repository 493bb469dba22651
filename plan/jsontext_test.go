// Tests of the raw-text checks of a plan (jsontext.go) and of the
// collective names Load accepts.
package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// posOf returns "line L, column C" of the n-th (0-based) occurrence of
// marker in data.
func posOf(t *testing.T, data, marker string, n int) string {
	t.Helper()
	off := -1
	for i := 0; i <= n; i++ {
		j := strings.Index(data[off+1:], marker)
		if j < 0 {
			t.Fatalf("marker %q: occurrence %d not found", marker, n)
		}
		off += 1 + j
	}
	line, col := position([]byte(data), int64(off))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// replaceOnce replaces the single occurrence of old in s.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q occurs %d times", old, strings.Count(s, old))
	}
	return strings.Replace(s, old, new, 1)
}

// planProblem is what a test compares of a *PlanError.
type planProblem struct {
	Path, Class, Msg string
}

func problemOf(err error) planProblem {
	var pe *PlanError
	if !errors.As(err, &pe) {
		return planProblem{Msg: fmt.Sprint(err)}
	}
	return planProblem{Path: pe.Path, Class: pe.Err.Error(), Msg: pe.Msg}
}

func TestLoadRejectsWhatDecodingHides(t *testing.T) {
	t.Parallel()
	const utf8Tail = " in a string: JSON text is UTF-8 and MSCCL++'s parser rejects it"
	dupTail := " given twice in one object (first at %s): a JSON decoder keeps one of the values; remove the other"
	many := ""
	for i := range 40 {
		many += fmt.Sprintf(`"x%d": %d, `, i, i)
	}
	tests := []struct {
		name string
		edit func(t *testing.T, s string) string
		want func(t *testing.T, s string) planProblem
	}{
		{
			name: "top-level key twice",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"collective": "allreduce",`, `"collective": "allreduce", "name": "other",`)
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrDuplicateKey.Error(), posOf(t, s, `"name"`, 1) + `: key "name"` + fmt.Sprintf(dupTail, posOf(t, s, `"name"`, 0))}
			},
		},
		{
			name: "key of an op twice",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `{"name": "put", "src_buff": [{"type": "i", "index": 1,`, `{"name": "put", "channel_type": "port", "src_buff": [{"type": "i", "index": 1,`)
			},
			want: func(t *testing.T, s string) planProblem {
				first := strings.Index(s, `"channel_type": "port"`)
				second := first + 1 + strings.Index(s[first+1:], `"channel_type"`)
				l1, c1 := position([]byte(s), int64(first))
				l2, c2 := position([]byte(s), int64(second))
				return planProblem{"gpus[1].threadblocks[0].ops[0]", ErrDuplicateKey.Error(), fmt.Sprintf(`line %d, column %d: key "channel_type"`+dupTail, l2, c2, fmt.Sprintf("line %d, column %d", l1, c1))}
			},
		},
		{
			name: "escaped spelling of a key",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"collective": "allreduce",`, `"collective": "allreduce", "n\u0061me": "other",`)
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrDuplicateKey.Error(), posOf(t, s, `"n\u0061me"`, 0) + `: key "name"` + fmt.Sprintf(dupTail, posOf(t, s, `"name"`, 0))}
			},
		},
		{
			name: "key twice in a channel of rank 0",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"connected_to": [1]}`, `"connected_to": [1], "connected_to": [1]}`)
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"gpus[0].channels[0]", ErrDuplicateKey.Error(), posOf(t, s, `"connected_to": [1]`, 1) + `: key "connected_to"` + fmt.Sprintf(dupTail, posOf(t, s, `"connected_to": [1]`, 0))}
			},
		},
		{
			name: "key twice among many",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"collective": "allreduce",`, `"collective": "allreduce", `+many+`"x7": 0,`)
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrDuplicateKey.Error(), posOf(t, s, `"x7"`, 1) + `: key "x7"` + fmt.Sprintf(dupTail, posOf(t, s, `"x7"`, 0))}
			},
		},
		{
			name: "invalid UTF-8 in name",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"name": "base"`, "\"name\": \"ba\xffse\"")
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrSyntax.Error(), "name: " + posOf(t, s, "\xff", 0) + ": invalid UTF-8 (byte 0xff)" + utf8Tail}
			},
		},
		{
			name: "invalid UTF-8 in a key",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"name": "base",`, "\"name\": \"base\", \"\xc3\": 1,")
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrSyntax.Error(), posOf(t, s, "\xc3", 0) + ": invalid UTF-8 (byte 0xc3) in a key: JSON text is UTF-8 and MSCCL++'s parser rejects it"}
			},
		},
		{
			name: "invalid UTF-8 in an array of a remote buffer",
			edit: func(t *testing.T, s string) string {
				return strings.Replace(s, `"access_channel_types": ["memory"]`, "\"access_channel_types\": [\"memory\", \"p\xe2\x82\"]", 1)
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"gpus[0].remote_buffers[0]", ErrSyntax.Error(), "access_channel_types[1]: " + posOf(t, s, "\xe2", 0) + ": invalid UTF-8 (byte 0xe2)" + utf8Tail}
			},
		},
		{
			name: "lone high surrogate in name",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"name": "base"`, `"name": "b\ud800ase"`)
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrSyntax.Error(), "name: " + posOf(t, s, `\ud800`, 0) + `: lone surrogate \ud800 (not followed by a low surrogate)` + utf8Tail}
			},
		},
		{
			name: "lone low surrogate in name",
			edit: func(t *testing.T, s string) string { return replaceOnce(t, s, `"name": "base"`, `"name": "\udc00"`) },
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrSyntax.Error(), "name: " + posOf(t, s, `\udc00`, 0) + `: lone surrogate \udc00 (not preceded by a high surrogate)` + utf8Tail}
			},
		},
		{
			name: "unknown collective",
			edit: func(t *testing.T, s string) string {
				return replaceOnce(t, s, `"collective": "allreduce"`, `"collective": "broadcast"`)
			},
			want: func(t *testing.T, s string) planProblem {
				return planProblem{"", ErrValue.Error(), `collective = "broadcast": want one of allgather, allreduce, reducescatter, alltoall, sendrecv, test (the collectives MSCCL++'s DSL writes)`}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := tt.edit(t, basePlan)
			_, err := Load([]byte(data))
			if err == nil {
				t.Fatal("Load accepted the plan")
			}
			if d := cmp.Diff(tt.want(t, data), problemOf(err)); d != "" {
				t.Errorf("Load error (-want +got):\n%s", d)
			}
			if errs := Check([]byte(data)); len(errs) == 0 || errs[0].Error() != err.Error() {
				t.Errorf("Check's first problem %v, want Load's %v", errs, err)
			}
		})
	}
}

// TestLoadAcceptsWellFormedText: escapes, surrogate pairs and UTF-8 in
// strings, equal keys in different objects, every known collective.
func TestLoadAcceptsWellFormedText(t *testing.T) {
	t.Parallel()
	edits := map[string][2]string{
		"surrogate pair":   {`"name": "base"`, `"name": "b\ud83d\ude00se"`},
		"UTF-8 name":       {`"name": "base"`, `"name": "bäse ∑ 😀"`},
		"escapes":          {`"name": "base"`, `"name": "b\"a\\s\/e\n\u00e9"`},
		"unknown key kept": {`"name": "base",`, `"name": "base", "comment": {"name": 1, "x": [{"name": 2}]},`},
	}
	for _, c := range Collectives() {
		edits["collective "+c] = [2]string{`"collective": "allreduce"`, fmt.Sprintf(`"collective": %q`, c)}
	}
	for name, e := range edits {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data := replaceOnce(t, basePlan, e[0], e[1])
			if errs := Check([]byte(data)); len(errs) != 0 {
				t.Errorf("Check = %v", errs)
			}
		})
	}
}
