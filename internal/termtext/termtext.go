// Package termtext fits text to a terminal: the width of an output
// (Width), a string cut to n characters (Fit), and a line broken at
// spaces to a width with its continuation lines hanging under its text
// or a flag line's explanation (WrapLine). Writer wraps the sections of
// a help text as they are written through it.
//
// To start:
//
//	w := termtext.NewWriter(os.Stdout, termtext.Width(os.Stdout), func(heading string) bool {
//		return heading == "OPTIONS:"
//	})
//	defer w.Flush()
package termtext

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// DefaultWidth is the width of output that is not a terminal.
const DefaultWidth = 80

// Width returns the width of w when it is a terminal, else DefaultWidth.
func Width(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 20 {
			return width
		}
	}
	return DefaultWidth
}

// Fit shortens s to at most n characters, ending it with "..." when cut.
func Fit(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 3 {
		return string([]rune(s)[:max(n, 0)])
	}
	return string([]rune(s)[:n-3]) + "..."
}

// Writer wraps to a width the lines of the sections of a text written
// through it that its predicate chooses, by the heading above them (a
// line that starts in column 0 and ends in ":"). A line is written once
// complete; Flush writes the rest.
type Writer struct {
	w       io.Writer
	width   int
	wrapped func(heading string) bool
	buf     []byte
	section string // the heading above the current line ("OPTIONS:")
}

// NewWriter returns a Writer to w that wraps to width the sections whose
// headings wrapped accepts.
func NewWriter(w io.Writer, width int, wrapped func(heading string) bool) *Writer {
	return &Writer{w: w, width: width, wrapped: wrapped}
}

// Write writes p, wrapping its complete lines.
func (ww *Writer) Write(p []byte) (int, error) {
	ww.buf = append(ww.buf, p...)
	for {
		i := bytes.IndexByte(ww.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(ww.buf[:i])
		ww.buf = ww.buf[i+1:]
		if line != "" && line[0] != ' ' && strings.HasSuffix(line, ":") {
			ww.section = line
		}
		if ww.wrapped(ww.section) {
			line = WrapLine(line, ww.width)
		}
		if _, err := io.WriteString(ww.w, line+"\n"); err != nil {
			return len(p), err
		}
	}
}

// Flush writes what is left of an unfinished line.
func (ww *Writer) Flush() {
	if len(ww.buf) > 0 {
		_, _ = io.WriteString(ww.w, WrapLine(string(ww.buf), ww.width))
		ww.buf = nil
	}
}

// WrapLine breaks line at spaces into lines of at most width characters
// (a word longer than a line stays whole). Continuation lines are
// indented as the line's text is, or, for a flag line ("   --size value, -s
// value   message SIZE ..."), to the column of its explanation.
func WrapLine(line string, width int) string {
	if utf8.RuneCountInString(line) <= width {
		return line
	}
	text := strings.TrimLeft(line, " ")
	indent := len(line) - len(text)
	hang := indent
	if strings.HasPrefix(text, "-") {
		if i := strings.Index(text, "  "); i > 0 {
			j := i + len(text[i:]) - len(strings.TrimLeft(text[i:], " "))
			if indent+j > width/2 {
				// A wide names column: the explanation goes below the
				// names, indented by 6.
				below := strings.Repeat(" ", indent+6) + text[j:]
				return line[:indent] + text[:i] + "\n" + WrapLine(below, width)
			}
			hang = indent + j
		}
	}
	var b strings.Builder
	b.WriteString(line[:indent])
	col := indent
	first := true
	// Keep the runs of spaces of the first line (the column alignment);
	// words after a break are separated by one space.
	for _, word := range strings.SplitAfter(text, " ") {
		w := strings.TrimRight(word, " ")
		if w == "" {
			if !first {
				continue
			}
			b.WriteString(word)
			col += len(word)
			continue
		}
		n := utf8.RuneCountInString(w)
		if col+n > width && col > hang {
			b.WriteString("\n" + strings.Repeat(" ", hang))
			col = hang
			first = false
		}
		b.WriteString(w)
		col += n
		if sp := len(word) - len(w); sp > 0 {
			if !first {
				sp = 1
			}
			b.WriteString(strings.Repeat(" ", sp))
			col += sp
		}
	}
	out := b.String()
	// No trailing spaces at the ends of the lines.
	lines := strings.Split(out, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}

// Cap cuts every line of msg to maxLine bytes (at a rune
// boundary) and keeps its first maxLines lines, saying how much it left
// out.
func Cap(msg string, maxLine, maxLines int) string {
	lines := strings.Split(msg, "\n")
	more := 0
	if len(lines) > maxLines {
		more = len(lines) - maxLines
		lines = lines[:maxLines]
	}
	for i, l := range lines {
		if len(l) <= maxLine {
			continue
		}
		cut := maxLine
		for cut > 0 && !utf8.RuneStart(l[cut]) {
			cut--
		}
		lines[i] = fmt.Sprintf("%s... (%d bytes more)", l[:cut], len(l)-cut)
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("... (%d lines more)", more))
	}
	return strings.Join(lines, "\n")
}

// Nearest returns the index of the word of words closest to w (the
// first of the closest), within maxEdits edits (EditDistance), or -1.
func Nearest(w string, words []string, maxEdits int) int {
	best, bestD := -1, maxEdits+1
	for i, c := range words {
		if d := EditDistance(w, c); d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance of a and b.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
