package plan

import (
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAppendString(t *testing.T) {
	t.Parallel()
	// Expected values are Python 3.11's json.dumps(s) output.
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"plain", "plain", `"plain"`},
		{"quote", `q"uote`, `"q\"uote"`},
		{"backslash", `back\slash`, `"back\\slash"`},
		{"short escapes", "nl\ncr\rtab\tbs\bff\f", `"nl\ncr\rtab\tbs\bff\f"`},
		{"control chars", "\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"DEL", "del\x7f", `"del\u007f"`},
		{"latin-1", "caf\u00e9", `"caf\u00e9"`},
		{"C1 control", "a\u0080b", `"a\u0080b"`},
		{"line separators", "\u2028\u2029", `"\u2028\u2029"`},
		{"BMP max", "\uffff", `"\uffff"`},
		{"CJK lowercase hex", "日本", `"\u65e5\u672c"`},
		{"astral surrogate pair", "\U0001F600", `"\ud83d\ude00"`},
		{"astral bounds", "\U00010000\U0010FFFF", `"\ud800\udc00\udbff\udfff"`},
		{"html and slash raw", "/<>&", `"/<>&"`},
		{"mixed", "a\"b\\c\nd\u00e9e\U0001F600f/", `"a\"b\\c\nd\u00e9e\ud83d\ude00f/"`},
		{"invalid utf-8 byte", "a\xffb", `"a\ufffdb"`},
		{"truncated sequence", "\xe6\x97", `"\ufffd\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(AppendString([]byte("prefix:"), tt.in))
			if diff := cmp.Diff("prefix:"+tt.want, got); diff != "" {
				t.Errorf("AppendString(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestWriterLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write func(e *Writer)
		want  string
	}{
		{"empty array", func(e *Writer) { e.Open('['); e.Close(']') }, `[]`},
		{"empty object", func(e *Writer) { e.Open('{'); e.Close('}') }, `{}`},
		{"empty ints", func(e *Writer) { e.Ints(nil) }, `[]`},
		{"ints", func(e *Writer) { e.Ints([]int{0, -1, 12}) }, "[\n  0,\n  -1,\n  12\n]"},
		{"nested", func(e *Writer) {
			e.Open('{')
			e.Key("a")
			e.Ints([]int{1})
			e.Key("b")
			e.Open('[')
			e.Close(']')
			e.Key("c")
			e.Bool(true)
			e.Close('}')
		}, "{\n  \"a\": [\n    1\n  ],\n  \"b\": [],\n  \"c\": true\n}"},
		{"big ints", func(e *Writer) {
			e.Open('[')
			for _, s := range []string{"18446744073709551615", "-5", "1180591620717411303424", "0"} {
				x, _ := new(big.Int).SetString(s, 10)
				e.Member()
				e.BigInt(x, "")
			}
			e.Member()
			e.BigInt(nil, "7")
			e.Close(']')
		}, "[\n  18446744073709551615,\n  -5,\n  1180591620717411303424,\n  0,\n  7\n]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := NewWriter(nil)
			tt.write(e)
			if diff := cmp.Diff(tt.want, string(e.Bytes())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriterDeepNesting checks indentation beyond the precomputed prefix.
func TestWriterDeepNesting(t *testing.T) {
	t.Parallel()
	const depth = 150
	e := NewWriter(nil)
	want := []byte{}
	for i := 0; i < depth; i++ {
		e.Open('[')
		e.Member()
		want = append(want, '[', '\n')
		for j := 0; j < 2*(i+1); j++ {
			want = append(want, ' ')
		}
	}
	e.Int(1)
	want = append(want, '1')
	for i := depth - 1; i >= 0; i-- {
		e.Close(']')
		want = append(want, '\n')
		for j := 0; j < 2*i; j++ {
			want = append(want, ' ')
		}
		want = append(want, ']')
	}
	if diff := cmp.Diff(string(want), string(e.Bytes())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
