package emit

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

// encoder is an append-based JSON writer with Python json.dumps(indent=2)
// layout. It tracks only the nesting depth and whether the innermost open
// container is still empty: closing a container always leaves its parent
// non-empty, so no stack is needed.
//
// With w == nil it accumulates everything in buf (Marshal); otherwise it
// flushes buf to w every flushAt bytes and records the first write error.
type encoder struct {
	buf   []byte
	w     io.Writer
	err   error
	depth int
	empty bool // the innermost open container has no member yet
}

// newline appends a newline and the indentation of the current depth.
func (e *encoder) newline() {
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

// member starts the next member of the open container: a separator if the
// container already has members, then a new indented line.
func (e *encoder) member() {
	if !e.empty {
		e.buf = append(e.buf, ',')
	}
	e.empty = false
	e.newline()
}

// key starts an object member; k is the pre-quoted key with its ": "
// separator, e.g. `"name": `.
func (e *encoder) key(k string) {
	e.member()
	e.buf = append(e.buf, k...)
}

// open appends an opening bracket and enters the container.
func (e *encoder) open(c byte) {
	e.buf = append(e.buf, c)
	e.depth++
	e.empty = true
}

// close leaves the container: `[]`/`{}` when it is empty, otherwise the
// closing bracket on its own line.
func (e *encoder) close(c byte) {
	e.depth--
	if !e.empty {
		e.newline()
	}
	e.buf = append(e.buf, c)
	e.empty = false
}

// int appends a decimal integer.
func (e *encoder) int(v int) { e.buf = strconv.AppendInt(e.buf, int64(v), 10) }

// int64 appends a decimal integer.
func (e *encoder) int64(v int64) { e.buf = strconv.AppendInt(e.buf, v, 10) }

// bigInt appends x in decimal, or def when x is nil.
func (e *encoder) bigInt(x *big.Int, def string) {
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

// bool appends true or false.
func (e *encoder) bool(v bool) {
	if v {
		e.buf = append(e.buf, "true"...)
	} else {
		e.buf = append(e.buf, "false"...)
	}
}

// lit appends a fixed ASCII string that needs no escaping, with quotes.
func (e *encoder) lit(s string) {
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
}

// ints appends an array of integers, one per line.
func (e *encoder) ints(xs []int) {
	e.open('[')
	for _, x := range xs {
		e.member()
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	}
	e.close(']')
}

// maybeFlush hands the buffer to the destination once it is large enough.
func (e *encoder) maybeFlush() {
	if e.w != nil && len(e.buf) >= flushAt {
		e.flush()
	}
}

// flush writes the whole buffer to the destination (streaming mode only).
// After a write error the buffer is discarded and later output dropped.
func (e *encoder) flush() {
	if e.w == nil {
		return
	}
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

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
