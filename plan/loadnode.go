package plan

// loadnode.go holds the loader's typed access to decoded JSON: a node is
// one JSON object with its path, and its accessors read a key as a
// string, integer, boolean, list or spelling, recording a problem that
// names the path, key and value when it is missing or malformed.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ---------------------------------------------------------------------------
// Typed access to decoded JSON objects.

// node is a decoded JSON object with its path.
type node struct {
	l    *loader
	path string
	m    map[string]any
}

// describe renders a decoded JSON value for messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		s := x.String()
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return s
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return strconv.Quote(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (l *loader) object(v any, path string) (node, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		l.errf(path, ErrType, "got %s, want an object", describe(v))
		return node{}, false
	}
	return node{l: l, path: path, m: m}, true
}

func (n node) has(key string) bool {
	_, ok := n.m[key]
	return ok
}

func (n node) get(key string, required bool) (any, bool) {
	v, ok := n.m[key]
	if !ok && required {
		n.l.errf(n.path, ErrMissing, "missing required key %q", key)
	}
	return v, ok
}

func (n node) str(key string, required bool) (string, bool) {
	v, ok := n.get(key, required)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		n.l.errf(n.path, ErrType, "%s: got %s, want a string", key, describe(v))
	}
	return s, ok
}

// boolean reads an optional or required JSON boolean; def is the value
// when absent or invalid.
func (n node) boolean(key string, required, def bool) bool {
	v, ok := n.get(key, required)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		n.l.errf(n.path, ErrType, "%s: got %s, want true or false", key, describe(v))
		return def
	}
	return b
}

// parseUint converts a decoded JSON number to a uint64 at most max; on
// failure msg says why and class is the sentinel.
func parseUint(v any, max uint64) (u uint64, msg string, class error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Sprintf("got %s, want a non-negative integer", describe(v)), ErrType
	}
	s := num.String()
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-") {
			return 0, fmt.Sprintf("%s does not fit in 64 bits", describe(v)), ErrOutOfRange
		}
		return 0, fmt.Sprintf("got %s, want a non-negative integer", describe(v)), ErrType
	}
	if u > max {
		return 0, fmt.Sprintf("%d exceeds %d, the largest value the executor stores", u, max), ErrLimit
	}
	return u, "", nil
}

// uint reads a non-negative integer at most max.
func (n node) uint(key string, required bool, max uint64) (uint64, bool) {
	v, ok := n.get(key, required)
	if !ok {
		return 0, false
	}
	u, msg, class := parseUint(v, max)
	if class != nil {
		n.l.errf(n.path, class, "%s: %s", key, msg)
		return 0, false
	}
	return u, true
}

// int reads a non-negative integer that fits in 32 bits, as an int.
func (n node) int(key string, required bool) (int, bool) {
	u, ok := n.uint(key, required, math.MaxInt32)
	return int(u), ok
}

func (n node) array(key string, required bool) ([]any, bool) {
	v, ok := n.get(key, required)
	if !ok {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		n.l.errf(n.path, ErrType, "%s: got %s, want an array", key, describe(v))
	}
	return a, ok
}

func (n node) child(key string, required bool) (node, bool) {
	v, ok := n.get(key, required)
	if !ok {
		return node{}, false
	}
	return n.l.object(v, joinPath(n.path, key))
}

// ints reads an array of non-negative 32-bit integers; ok is false when
// the key is absent or any element is invalid (the valid ones are still
// returned, invalid ones as -1).
func (n node) ints(key string, required bool) ([]int, bool) {
	a, ok := n.array(key, required)
	if !ok {
		return nil, false
	}
	out := make([]int, len(a))
	for i, v := range a {
		u, msg, class := parseUint(v, math.MaxInt32)
		if class != nil {
			n.l.errf(n.path, class, "%s[%d]: %s", key, i, msg)
			out[i] = -1
			ok = false
			continue
		}
		out[i] = int(u)
	}
	return out, ok
}

// ---------------------------------------------------------------------------
// Spellings.

// knownCollective reports whether Load accepts c as a plan's
// "collective": one the MSCCL++ DSL writes, or alltoallv.
func knownCollective(c string) bool {
	return c == AllToAllVCollective || slices.Contains(Collectives(), c)
}

// channelType reads a channel type string; ok is false when absent or
// invalid.
func (n node) channelType(key string, required bool) (ChannelType, bool) {
	s, ok := n.str(key, required)
	if !ok {
		return NoChannel, false
	}
	ct, ok := ParseChannelType(s)
	if !ok {
		n.l.errf(n.path, ErrValue, "%s = %s: want \"memory\", \"port\", \"switch\" or \"none\"", key, describe(s))
	}
	return ct, ok
}

func (n node) bufferType(key string, required bool) (BufferType, bool) {
	s, ok := n.str(key, required)
	if !ok {
		return Input, false
	}
	bt, ok := ParseBufferType(s)
	if !ok {
		n.l.errf(n.path, ErrValue, "%s = %s: want \"i\", \"o\" or \"s\"", key, describe(s))
	}
	return bt, ok
}
