package plan

import (
	"io"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// flushAt is the buffered size at which a streaming encoder hands its bytes
// to the destination writer.
const flushAt = 64 << 10

// indent is a newline followed by enough spaces for 64 nesting levels; the
// prefix indent[:1+2*depth] starts a member line at that depth.
const indent = "\n" +
	"                                                                " +
	"                                                                "

// Writer is the plan format's one encoder: an append-based JSON writer
// with Python json.dumps(indent=2) layout, through which package emit
// writes plans byte for byte as the DSL prints them. It tracks only the nesting depth and whether the innermost open
// container is still empty: closing a container always leaves its parent
// non-empty, so no stack is needed.
//
// With w == nil it accumulates everything (Bytes); otherwise it flushes
// its buffer to w every flushAt bytes and records the first write error
// (Err).
type Writer struct {
	buf   []byte
	w     io.Writer
	err   error
	depth int
	empty bool // the innermost open container has no member yet
}

// newline appends a newline and the indentation of the current depth.
func (e *Writer) newline() {
	n := 1 + 2*e.depth
	if n <= len(indent) {
		e.buf = append(e.buf, indent[:n]...)
		return
	}
	e.buf = append(e.buf, indent...)
	for n -= len(indent); n > 0; {
		k := min(n, len(indent)-1)
		e.buf = append(e.buf, indent[1:1+k]...)
		n -= k
	}
}

// Member starts the next member of the open container: a separator if the
// container already has members, then a new indented line.
func (e *Writer) Member() {
	if !e.empty {
		e.buf = append(e.buf, ',')
	}
	e.empty = false
	e.newline()
}

// Key starts an object member named k (one of the Key constants, which
// need no escaping) and writes its ": " separator.
func (e *Writer) Key(k string) {
	n := 1 + 2*e.depth
	if n > len(indent) {
		e.Member()
		e.buf = append(append(append(e.buf, '"'), k...), `": `...)
		return
	}
	// One local slice through the appends: the compiler keeps it in
	// registers instead of storing e.buf back after each.
	b := e.buf
	if !e.empty {
		b = append(b, ',')
	}
	b = append(b, indent[:n]...)
	b = append(b, '"')
	b = append(b, k...)
	b = append(b, '"', ':', ' ')
	e.buf = b
	e.empty = false
}

// Open appends an opening bracket and enters the container.
func (e *Writer) Open(c byte) {
	e.buf = append(e.buf, c)
	e.depth++
	e.empty = true
}

// Close leaves the container: `[]`/`{}` when it is empty, otherwise the
// closing bracket on its own line.
func (e *Writer) Close(c byte) {
	e.depth--
	if !e.empty {
		if n := 1 + 2*e.depth; n <= len(indent) {
			e.buf = append(append(e.buf, indent[:n]...), c)
			e.empty = false
			return
		}
		e.newline()
	}
	e.buf = append(e.buf, c)
	e.empty = false
}

// Int appends a decimal integer.
func (e *Writer) Int(v int) { e.buf = strconv.AppendInt(e.buf, int64(v), 10) }

// Int64 appends a decimal integer.
func (e *Writer) Int64(v int64) { e.buf = strconv.AppendInt(e.buf, v, 10) }

// BigInt appends x in decimal, or def when x is nil.
func (e *Writer) BigInt(x *big.Int, def string) {
	if x == nil {
		e.buf = append(e.buf, def...)
		return
	}
	if x.IsInt64() {
		e.buf = strconv.AppendInt(e.buf, x.Int64(), 10)
		return
	}
	e.buf = x.Append(e.buf, 10)
}

// Bool appends true or false.
func (e *Writer) Bool(v bool) {
	if v {
		e.buf = append(e.buf, "true"...)
	} else {
		e.buf = append(e.buf, "false"...)
	}
}

// Lit appends a fixed ASCII string that needs no escaping, with quotes.
func (e *Writer) Lit(s string) {
	e.buf = append(append(append(e.buf, '"'), s...), '"')
}

// Ints appends an array of integers, one per line.
func (e *Writer) Ints(xs []int) {
	e.Open('[')
	for _, x := range xs {
		e.Member()
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	}
	e.Close(']')
}

// MaybeFlush hands the buffer to the destination once it is large enough.
func (e *Writer) MaybeFlush() {
	if e.w != nil && len(e.buf) >= flushAt {
		e.Flush()
	}
}

// Flush writes the whole buffer to the destination (streaming mode only)
// and returns the first write error. After a write error the buffer is
// discarded and later output dropped.
func (e *Writer) Flush() error {
	if e.w == nil {
		return nil
	}
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
	return e.err
}

// NewWriter returns a Writer that streams to w, or, with w == nil,
// accumulates its output for Bytes.
func NewWriter(w io.Writer) *Writer {
	if w == nil {
		return &Writer{}
	}
	return &Writer{w: w, buf: make([]byte, 0, flushAt+flushAt/4)}
}

// Bytes returns what a Writer without destination accumulated.
func (e *Writer) Bytes() []byte { return e.buf }

// Err returns the first write error of a streaming Writer.
func (e *Writer) Err() error { return e.err }

// Quoted appends s as a JSON string literal, escaped as AppendString does.
func (e *Writer) Quoted(s string) { e.buf = AppendString(e.buf, s) }

// Byte appends one byte as it is (the newline after a plan).
func (e *Writer) Byte(c byte) { e.buf = append(e.buf, c) }

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string literal escaped the way
// Python's json.dumps does with ensure_ascii=True: `"` and `\` are
// backslash-escaped; \b \f \n \r \t use their short forms; every other
// character outside U+0020..U+007E (U+007F included) becomes \uXXXX with
// lowercase hex digits, characters beyond U+FFFF as a UTF-16 surrogate pair;
// `/`, `<`, `>` and `&` are written as themselves. Python strings cannot
// hold invalid UTF-8, so each byte of an invalid sequence in s is written
// as \ufffd (U+FFFD), as Go's encoding/json does.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = appendU(dst, rune(c))
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			r -= 0x10000
			dst = appendU(dst, 0xd800+(r>>10))
			dst = appendU(dst, 0xdc00+(r&0x3ff))
		} else {
			// utf8.RuneError with size 1 is an invalid byte: U+FFFD.
			dst = appendU(dst, r)
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendU appends \uXXXX for a BMP code unit.
func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u',
		hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
