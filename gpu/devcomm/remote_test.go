package devcomm

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRemoteRecords: records queued by post decode to what was posted,
// several to a message; a malformed message is refused, saying what is
// wrong with it.
func TestRemoteRecords(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no sender or receiver: only the queue is used
	rc := &remoteCalls{ctx: ctx, kick: make(chan struct{}, 1)}
	long := strings.Repeat("x", 2*mbDescBytes)
	rc.post(7, callRecord{sig: 0xfeed, desc: "ncclAllReduce count 32 float sum"})
	rc.post(8, callRecord{sig: 1, refused: true, desc: long})
	recs, seqs, err := decodeRemote(rc.queue)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || seqs[0] != 7 || seqs[1] != 8 {
		t.Fatalf("decoded %d records, calls %v: want calls 7 and 8", len(recs), seqs)
	}
	if r := recs[0]; r.sig != 0xfeed || r.refused || r.desc != "ncclAllReduce count 32 float sum" {
		t.Errorf("record 0: %+v", r)
	}
	if r := recs[1]; r.sig != 1 || !r.refused || r.desc != long[:mbDescBytes-8] {
		t.Errorf("record 1: sig %d refused %v, a description of %d bytes", r.sig, r.refused, len(r.desc))
	}

	le := binary.LittleEndian
	rec := func(flags, n uint32, desc string) []byte {
		b := le.AppendUint64(nil, 3)
		b = le.AppendUint64(b, 9)
		b = le.AppendUint32(b, flags)
		b = le.AppendUint32(b, n)
		return append(b, desc...)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"short", rec(0, 0, "")[:remoteHead-1], "a record of 23 bytes at byte 0"},
		{"flags", rec(4, 0, ""), "call 3: unknown flags 0x4"},
		{"description past the end", rec(0, 5, "abc"), "call 3: a description of 5 bytes in a record of 3"},
		{"second record short", append(rec(0, 1, "a"), 1, 2), "a record of 2 bytes at byte 25"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := decodeRemote(c.msg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestRemoteRoutes: every rank's records reach exactly one rank of every
// other host, the one that expects them, and ranks spread the filing
// over their host's ranks.
func TestRemoteRoutes(t *testing.T) {
	for _, c := range []struct {
		hosts []int
		to    [][]int // per rank
	}{
		{hosts: []int{0, 1}, to: [][]int{{1}, {0}}},
		{hosts: []int{0, 0, 1, 1}, to: [][]int{{2}, {3}, {0}, {1}}},
		{hosts: []int{0, 1, 0, 1}, to: [][]int{{1}, {0}, {3}, {2}}},
		{hosts: []int{0, 0, 0, 1}, to: [][]int{{3}, {3}, {3}, {0}}},
		{hosts: []int{0, 0, 1, 2, 2, 2}, to: [][]int{{2, 3}, {2, 4}, {0, 3}, {0, 2}, {1, 2}, {0, 2}}},
		{hosts: []int{0, 0, 0}, to: [][]int{nil, nil, nil}},
	} {
		t.Run(fmt.Sprint(c.hosts), func(t *testing.T) {
			from := make([][]int, len(c.hosts))
			for r := range c.hosts {
				var to []int
				to, from[r] = remoteRoutes(c.hosts, r)
				if !slices.Equal(to, c.to[r]) {
					t.Errorf("rank %d sends to %v, want %v", r, to, c.to[r])
				}
			}
			for r := range c.hosts {
				for _, q := range c.to[r] {
					if !slices.Contains(from[q], r) {
						t.Errorf("rank %d sends to rank %d, which does not receive from it (it receives from %v)", r, q, from[q])
					}
				}
				for _, p := range from[r] {
					if !slices.Contains(c.to[p], r) {
						t.Errorf("rank %d receives from rank %d, which does not send to it", r, p)
					}
				}
			}
		})
	}
}
