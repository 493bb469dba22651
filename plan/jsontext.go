package plan

// jsontext.go holds the checks of a plan's raw JSON text that decoding it
// into Go values cannot make, because encoding/json loses what they look
// at: a key given twice in one object (the decoder keeps the last value),
// invalid UTF-8 in a string and escaped lone surrogates (the decoder
// replaces both with U+FFFD). Each problem is reported with its JSON path
// and its line and column.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// manyKeys is the key count above which an object's keys are looked up in
// a map instead of a linear scan.
const manyKeys = 16

// textLevel is one open container of the scan.
type textLevel struct {
	object bool
	// expectKey: in an object, the next string is a key.
	expectKey bool
	// index is the current element of an array.
	index int
	// key is the current key of an object (unescaped).
	key []byte
	// keys are the keys seen in an object, with their offsets; set
	// indexes them once there are more than manyKeys.
	keys []keyAt
	set  map[string]int
}

// keyAt is a key (a slice of the document, or its unescaped copy) and
// the offset of its opening quote.
type keyAt struct {
	key []byte
	off int
}

// textScan walks a document that json.Decoder accepted.
type textScan struct {
	l      *loader
	data   []byte
	levels []textLevel // reused by depth, so that key slices are reused
	depth  int
}

// scanText reports duplicate keys, invalid UTF-8 and lone surrogates in
// data, a document encoding/json decoded without error.
func (l *loader) scanText(data []byte) {
	s := &textScan{l: l, data: data}
	for i := 0; i < len(data); {
		switch data[i] {
		case '{', '[':
			s.push(data[i] == '{')
			i++
		case '}', ']':
			if s.depth > 0 {
				s.depth--
			}
			i++
		case ',':
			if t := s.top(); t != nil {
				if t.object {
					t.expectKey = true
				} else {
					t.index++
				}
			}
			i++
		case '"':
			i = s.str(i)
		default:
			i++
		}
	}
}

// top returns the innermost open container, nil at the top level.
func (s *textScan) top() *textLevel {
	if s.depth == 0 {
		return nil
	}
	return &s.levels[s.depth-1]
}

func (s *textScan) push(object bool) {
	if s.depth == len(s.levels) {
		s.levels = append(s.levels, textLevel{})
	}
	t := &s.levels[s.depth]
	s.depth++
	t.object, t.expectKey, t.index, t.key = object, object, 0, nil
	t.keys, t.set = t.keys[:0], nil
}

// str checks the string starting at data[i] (the opening quote) and
// returns the offset after its closing quote.
func (s *textScan) str(i int) int {
	data := s.data
	j := i + 1
	escaped := false
	for j < len(data) && data[j] != '"' {
		if data[j] == '\\' {
			escaped = true
			j++
		}
		j++
	}
	end := min(j+1, len(data))
	raw := data[i+1 : min(j, len(data))]
	t := s.top()
	isKey := t != nil && t.object && t.expectKey
	if msg, at := badText(raw); msg != "" {
		what := "a string"
		if isKey {
			what = "a key"
		}
		line, col := position(data, int64(i+1+at))
		s.report(isKey, ErrSyntax, "line %d, column %d: %s in %s: JSON text is UTF-8 and MSCCL++'s parser rejects it", line, col, msg, what)
	}
	if !isKey {
		return end
	}
	key := raw
	if escaped {
		var u string
		if err := json.Unmarshal(data[i:end], &u); err == nil {
			key = []byte(u)
		}
	}
	t.expectKey = false
	t.key = key
	if first, dup := t.find(key); dup {
		line, col := position(data, int64(i))
		fl, fc := position(data, int64(first))
		s.report(true, ErrDuplicateKey, "line %d, column %d: key %s given twice in one object (first at line %d, column %d): a JSON decoder keeps one of the values; remove the other",
			line, col, describe(string(key)), fl, fc)
		return end
	}
	t.keys = append(t.keys, keyAt{key, i})
	if t.set != nil {
		t.set[string(key)] = i
	} else if len(t.keys) > manyKeys {
		t.set = make(map[string]int, 2*len(t.keys))
		for _, k := range t.keys {
			t.set[string(k.key)] = k.off
		}
	}
	return end
}

// find returns the offset of key if the object already has it.
func (t *textLevel) find(key []byte) (int, bool) {
	if t.set != nil {
		off, ok := t.set[string(key)]
		return off, ok
	}
	for _, k := range t.keys {
		if bytes.Equal(k.key, key) {
			return k.off, true
		}
	}
	return 0, false
}

// report records a problem at the current position: the path of the
// innermost object, and in the message the keys and indices from that
// object down to the value (nothing more for a key of that object).
func (s *textScan) report(isKey bool, class error, format string, args ...any) {
	path, rel := "", ""
	obj := -1 // the innermost object whose path is the error's path
	for d := s.depth - 1; d >= 0; d-- {
		if s.levels[d].object {
			obj = d
			break
		}
	}
	for d := 0; d < obj; d++ {
		path = s.levels[d].step(path)
	}
	if obj >= 0 && !isKey {
		for d := obj; d < s.depth; d++ {
			rel = s.levels[d].step(rel)
		}
	}
	msg := fmt.Sprintf(format, args...)
	if rel != "" {
		msg = rel + ": " + msg
	}
	s.l.errf(path, class, "%s", msg)
}

// step appends the level's current key or index to path.
func (t *textLevel) step(path string) string {
	if t.object {
		return joinPath(path, string(t.key))
	}
	return IndexPath(path, t.index)
}

// badText returns what is wrong with the raw bytes of a JSON string (the
// text between its quotes), and the offset of the problem in raw: invalid
// UTF-8, or a \u escape of a UTF-16 surrogate that is not part of a pair.
func badText(raw []byte) (string, int) {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw) && raw[i+1] == 'u':
			u, ok := hex4(raw, i+2)
			if !ok {
				return "", 0 // the decoder would have refused it
			}
			switch {
			case u >= 0xD800 && u < 0xDC00:
				if lo, ok := hex4(raw, i+8); ok && i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' && lo >= 0xDC00 && lo < 0xE000 {
					i += 12
					continue
				}
				return fmt.Sprintf("lone surrogate \\u%04x (not followed by a low surrogate)", u), i
			case u >= 0xDC00 && u < 0xE000:
				return fmt.Sprintf("lone surrogate \\u%04x (not preceded by a high surrogate)", u), i
			}
			i += 6
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n <= 1 {
				return fmt.Sprintf("invalid UTF-8 (byte 0x%02x)", c), i
			}
			i += n
		}
	}
	return "", 0
}

// hex4 reads the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(raw) {
		return 0, false
	}
	u, err := strconv.ParseUint(string(raw[i:i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(u), true
}
