package devcomm

import (
	"errors"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
)

// TestCheckUser: the caller's buffers of an in-place layout must sit at
// the layout's relative position; those of an out-of-place one must not
// overlap. The error names the addresses.
func TestCheckUser(t *testing.T) {
	t.Parallel()
	layout := func(coll string, inPlace bool) *executor.BufferLayout {
		l, err := executor.Layout(coll, 4, 1024, executor.Float32, inPlace)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	const base = gpu.DevPtr(0x10000)
	cases := []struct {
		name    string
		l       *executor.BufferLayout
		rank    int
		in, out gpu.DevPtr
		want    string // "" for no error, else a part of it
	}{
		{"in place, one buffer", layout("allreduce", true), 1, base, base, ""},
		{"in place, moved input", layout("allreduce", true), 1, base + 8, base, "must be at 0 bytes from the output"},
		{"allgather in place, rank's slice", layout("allgather", true), 2, base + 2*256, base, ""},
		{"allgather in place, wrong slice", layout("allgather", true), 2, base + 256, base, "must be at 512 bytes"},
		{"out of place, apart", layout("allreduce", false), 0, base, base + 1024, ""},
		{"out of place, overlapping", layout("allreduce", false), 0, base, base + 512, "overlap, and the plan is out of place"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkUser(tc.l, tc.rank, tc.in, tc.out)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkUser: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("checkUser: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestSameCall: a steady call's records agree when no rank refused and
// every signature is rank 0's; else the error names the rank and both
// calls.
func TestSameCall(t *testing.T) {
	t.Parallel()
	rec := func(sig uint64, desc string) callRecord { return callRecord{sig: sig, desc: desc} }
	cases := []struct {
		name string
		all  []callRecord
		want string
	}{
		{"same", []callRecord{rec(1, "a"), rec(1, "a"), rec(1, "a")}, ""},
		{"mismatch", []callRecord{rec(1, "a"), rec(1, "a"), rec(2, "b")}, "rank 0 called a, rank 2 called b"},
		{"refused", []callRecord{rec(1, "a"), {sig: 1, refused: true, desc: "a: no room"}}, "rank 1 refused it: a: no room"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := sameCall(tc.all)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("sameCall: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestMismatch: calls that meet differ by description, or by plan
// instance (key) for the same description, which the error says.
func TestMismatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		all  []callRec
		want string
	}{
		{"same", []callRec{{Key: "k", Desc: "d"}, {Key: "k", Desc: "d"}}, ""},
		{"other call", []callRec{{Key: "k", Desc: "d"}, {Key: "k2", Desc: "e"}}, "rank 0 called d, rank 1 called e"},
		{"other instance", []callRec{{Key: "k", Desc: "d"}, {Key: "k", Desc: "d"}, {Key: "k2", Desc: "d"}},
			"rank 0 and rank 2 called d for different plan instances or reductions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := mismatch(tc.all)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("mismatch: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCallReduction: a call's session key names its reduction (but a
// sum's, the key as it is), and Open's options take the call's
// reduction unless they name another.
func TestCallReduction(t *testing.T) {
	t.Parallel()
	open := func(red executor.ReduceOp) func() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
		return func() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
			return nil, nil, executor.Options{Reduce: red}, nil
		}
	}
	sum := Call{Key: "k", Desc: "d", Open: open(executor.ReduceSum)}
	if got := sum.sessionKey(); got != "k" {
		t.Errorf("sum's session key %q, want the key", got)
	}
	other := executor.ReduceOp(1)
	if !other.Valid() || other == executor.ReduceSum {
		t.Fatalf("reduction 1 (%v) is not a valid non-sum reduction", other)
	}
	call := Call{Key: "k", Desc: "d", Open: open(executor.ReduceSum), Reduce: other}
	if got := call.sessionKey(); got == "k" || !strings.HasPrefix(got, "k\x00") {
		t.Errorf("%v's session key %q, want the key and the reduction", other, got)
	}
	if _, _, opts, err := call.openCall(); err != nil || opts.Reduce != other {
		t.Errorf("openCall: %v, reduction %v, want %v", err, opts.Reduce, other)
	}
	call.Open = open(other)
	if _, _, _, err := call.openCall(); err != nil {
		t.Errorf("openCall with Open's reduction the call's: %v", err)
	}
	call.Reduce = executor.ReduceSum
	if _, _, _, err := call.openCall(); err == nil {
		t.Error("openCall with Open's reduction not the call's: no error")
	}
}

// TestCapturable: plans with port channels or per-call tables are
// refused with ErrNotCapturable, saying why.
func TestCapturable(t *testing.T) {
	t.Parallel()
	plain := &executor.Instance{Ranks: []executor.RankInstance{{Rank: 0}, {Rank: 1}}}
	if err := capturable(plain); err != nil {
		t.Errorf("a plan without port channels: %v", err)
	}
	port := &executor.Instance{Ranks: []executor.RankInstance{{Rank: 0}, {Rank: 1, PortChannels: []executor.ChannelEnd{{Peer: 0}}}}}
	err := capturable(port)
	if !errors.Is(err, ErrNotCapturable) || !strings.Contains(err.Error(), "rank 1 has 1 port channels") {
		t.Errorf("a plan with port channels: %v", err)
	}
}
