package main

import (
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/gpu"
)

// TestMaxSessionsEnv reads MSCCLGO_NCCL_MAX_SESSIONS: unset is the
// default, a number from 1 to gpu.MaxSessionsLimit is taken, anything
// else is an error that names the variable, the value and the bounds.
func TestMaxSessionsEnv(t *testing.T) {
	for _, c := range []struct {
		value string
		want  int
		err   string
	}{
		{"", gpu.DefaultMaxSessions, ""},
		{"1", 1, ""},
		{"4", 4, ""},
		{"4096", 4096, ""},
		{"0", 0, `MSCCLGO_NCCL_MAX_SESSIONS="0": want a number of plan instances open per communicator from 1 to 4096 (default 64)`},
		{"-3", 0, `MSCCLGO_NCCL_MAX_SESSIONS="-3": want`},
		{"4097", 0, `MSCCLGO_NCCL_MAX_SESSIONS="4097": want`},
		{"many", 0, `MSCCLGO_NCCL_MAX_SESSIONS="many": want`},
		{"1e3", 0, `MSCCLGO_NCCL_MAX_SESSIONS="1e3": want`},
	} {
		got, err := parseMaxSessions(c.value)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %v, %v; want %v", c.value, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, %v; want an error with %q", c.value, got, err, c.err)
		}
	}
}
