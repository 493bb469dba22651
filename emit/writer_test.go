package emit

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

func TestEncoderLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write func(e *encoder)
		want  string
	}{
		{"empty array", func(e *encoder) { e.open('['); e.close(']') }, `[]`},
		{"empty object", func(e *encoder) { e.open('{'); e.close('}') }, `{}`},
		{"empty ints", func(e *encoder) { e.ints(nil) }, `[]`},
		{"ints", func(e *encoder) { e.ints([]int{0, -1, 12}) }, "[\n  0,\n  -1,\n  12\n]"},
		{"nested", func(e *encoder) {
			e.open('{')
			e.key(`"a": `)
			e.ints([]int{1})
			e.key(`"b": `)
			e.open('[')
			e.close(']')
			e.key(`"c": `)
			e.bool(true)
			e.close('}')
		}, "{\n  \"a\": [\n    1\n  ],\n  \"b\": [],\n  \"c\": true\n}"},
		{"big ints", func(e *encoder) {
			e.open('[')
			for _, s := range []string{"18446744073709551615", "-5", "1180591620717411303424", "0"} {
				x, _ := new(big.Int).SetString(s, 10)
				e.member()
				e.bigInt(x, "")
			}
			e.member()
			e.bigInt(nil, "7")
			e.close(']')
		}, "[\n  18446744073709551615,\n  -5,\n  1180591620717411303424,\n  0,\n  7\n]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &encoder{}
			tt.write(e)
			if diff := cmp.Diff(tt.want, string(e.buf)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEncoderDeepNesting checks indentation beyond the precomputed prefix.
func TestEncoderDeepNesting(t *testing.T) {
	t.Parallel()
	const depth = 150
	e := &encoder{}
	want := []byte{}
	for i := 0; i < depth; i++ {
		e.open('[')
		e.member()
		want = append(want, '[', '\n')
		for j := 0; j < 2*(i+1); j++ {
			want = append(want, ' ')
		}
	}
	e.int(1)
	want = append(want, '1')
	for i := depth - 1; i >= 0; i-- {
		e.close(']')
		want = append(want, '\n')
		for j := 0; j < 2*i; j++ {
			want = append(want, ' ')
		}
		want = append(want, ']')
	}
	if diff := cmp.Diff(string(want), string(e.buf)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
