package starlib

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// memSource is an in-memory Source for tests.
type memSource map[string]string

func (m memSource) ReadFile(name string) ([]byte, error) {
	s, ok := m[name]
	if !ok {
		return nil, os.ErrNotExist
	}
	return []byte(s), nil
}

func (m memSource) Display(name string) string { return name }

var wantRE = regexp.MustCompile(`### "(.*)"`)

// TestErrors runs the chunks of testdata/errors.star: the line marked
// ### "regexp" must fail there with a matching message; unmarked chunks
// must succeed.
func TestErrors(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/errors.star")
	if err != nil {
		t.Fatal(err)
	}
	line := 1
	for i, chunk := range strings.Split(string(data), "\n---\n") {
		first := line
		line += strings.Count(chunk, "\n") + 2
		// Pad with blank lines so positions match the file.
		src := strings.Repeat("\n", first-1) + chunk
		wantLine, wantMsg := 0, ""
		for j, l := range strings.Split(src, "\n") {
			if m := wantRE.FindStringSubmatch(l); m != nil {
				wantLine, wantMsg = j+1, m[1]
			}
		}
		t.Run(strings.TrimSpace(strings.SplitN(chunk, "\n", 2)[0]), func(t *testing.T) {
			t.Parallel()
			_, err := Eval(memSource{"errors.star": src}, "errors.star", Options{})
			if wantMsg == "" {
				if err != nil {
					t.Fatalf("chunk %d: unexpected error: %v", i, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("chunk %d: no error, want %q at line %d", i, wantMsg, wantLine)
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("chunk %d: error %v is not an *Error", i, err)
			}
			if !regexp.MustCompile(wantMsg).MatchString(se.Msg) {
				t.Errorf("chunk %d: got %q, want a match for %q", i, se.Msg, wantMsg)
			}
			if int(se.Pos.Line) != wantLine {
				t.Errorf("chunk %d: error at %s, want line %d", i, se.Pos, wantLine)
			}
		})
	}
}
