package plan

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBufferTypeSpellings(t *testing.T) {
	tests := []struct {
		b          BufferType
		plan, name string
	}{
		{Input, "i", "input"},
		{Output, "o", "output"},
		{Scratch, "s", "scratch"},
		{BufferType(7), "BufferType(7)", "BufferType(7)"},
	}
	for _, tt := range tests {
		if got := tt.b.String(); got != tt.plan {
			t.Errorf("BufferType(%d).String() = %q, want %q", uint8(tt.b), got, tt.plan)
		}
		if got := tt.b.Name(); got != tt.name {
			t.Errorf("BufferType(%d).Name() = %q, want %q", uint8(tt.b), got, tt.name)
		}
		got, ok := ParseBufferType(tt.plan)
		if want := tt.b < NumBufferTypes; ok != want || (ok && got != tt.b) {
			t.Errorf("ParseBufferType(%q) = %v, %v; want %v, %v", tt.plan, got, ok, tt.b, want)
		}
	}
	for _, s := range []string{"", "input", "I", "x"} {
		if b, ok := ParseBufferType(s); ok {
			t.Errorf("ParseBufferType(%q) = %v, true; want false", s, b)
		}
	}
}

func TestChannelTypeSpellings(t *testing.T) {
	tests := []struct {
		c    ChannelType
		plan string
	}{
		{NoChannel, "none"},
		{Memory, "memory"},
		{Port, "port"},
		{Switch, "switch"},
		{ChannelType(9), "ChannelType(9)"},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.plan {
			t.Errorf("ChannelType(%d).String() = %q, want %q", uint8(tt.c), got, tt.plan)
		}
		got, ok := ParseChannelType(tt.plan)
		if want := tt.c < NumChannelTypes; ok != want || (ok && got != tt.c) {
			t.Errorf("ParseChannelType(%q) = %v, %v; want %v, %v", tt.plan, got, ok, tt.c, want)
		}
	}
	for _, s := range []string{"", "Memory", "nvls", "sm"} {
		if c, ok := ParseChannelType(s); ok {
			t.Errorf("ParseChannelType(%q) = %v, true; want false", s, c)
		}
	}
}

// TestOpTypeSpellings checks that every op type has its own name, which
// ParseOpType reads back, and that the names MSCCL++ does not load are
// rejected.
func TestOpTypeSpellings(t *testing.T) {
	seen := map[string]OpType{}
	for o := OpType(0); o < NumOpTypes; o++ {
		name := o.String()
		if name == "" || strings.HasPrefix(name, "OpType(") {
			t.Errorf("op type %d has no name", uint8(o))
			continue
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("op types %d and %d are both named %q", uint8(prev), uint8(o), name)
		}
		seen[name] = o
		if got, ok := ParseOpType(name); !ok || got != o {
			t.Errorf("ParseOpType(%q) = %d, %v; want %d, true", name, uint8(got), ok, uint8(o))
		}
	}
	for _, s := range []string{GroupLoadReduceName, "start", "", "Copy", "reduce"} {
		if o, ok := ParseOpType(s); ok {
			t.Errorf("ParseOpType(%q) = %v, true; want false", s, o)
		}
	}
}

// TestKernelLayoutNumbering checks that the GPU kernel's layout
// (csrc/mscclgo/layout.h) numbers buffer types, channel types and op
// types as this package does: the host writes these values into device
// records and the kernel switches on them.
func TestKernelLayoutNumbering(t *testing.T) {
	src, err := os.ReadFile("../csrc/mscclgo/layout.h")
	if err != nil {
		t.Fatal(err)
	}
	// enum returns the members of the C enum that holds first, less the
	// prefix, lower-cased, in declaration order; an explicit value must
	// be the member's position.
	enum := func(first, prefix string) []string {
		t.Helper()
		m := regexp.MustCompile(`enum\s*\{([^}]*\b` + first + `\b[^}]*)\}`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("layout.h has no enum with %s", first)
		}
		var names []string
		for i, member := range strings.Split(string(m[1]), ",") {
			member = strings.TrimSpace(member)
			if member == "" {
				continue
			}
			name, value, explicit := strings.Cut(member, "=")
			name = strings.TrimSpace(name)
			if explicit && strings.TrimSpace(value) != strconv.Itoa(i) {
				t.Fatalf("layout.h: %s = %s, want %d", name, strings.TrimSpace(value), i)
			}
			names = append(names, strings.ToLower(strings.TrimPrefix(name, prefix)))
		}
		return names
	}
	var bufs, chans, ops []string
	for b := BufferType(0); b < NumBufferTypes; b++ {
		bufs = append(bufs, b.Name())
	}
	for c := ChannelType(0); c < NumChannelTypes; c++ {
		chans = append(chans, c.String())
	}
	for o := OpType(0); o < NumOpTypes; o++ {
		ops = append(ops, o.String())
	}
	ops = append(ops, "num_ops")
	for _, tt := range []struct {
		first, prefix string
		want          []string
	}{
		{"MG_INPUT", "MG_", bufs},
		{"MG_CH_NONE", "MG_CH_", chans},
		{"MG_NOP", "MG_", ops},
	} {
		if diff := cmp.Diff(tt.want, enum(tt.first, tt.prefix)); diff != "" {
			t.Errorf("layout.h's enum of %s differs from package plan (-plan +layout.h):\n%s", tt.first, diff)
		}
	}
}
