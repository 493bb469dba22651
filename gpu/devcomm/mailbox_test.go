//go:build unix

package devcomm

import (
	"strings"
	"testing"
	"time"
)

// TestPublishWaitsForSlowestPeer: a rank's ring of records holds mbRing
// calls; a publish that would overwrite a record some peer has not read
// waits for it (here: times out, naming the call), even though publish
// remembers how far its peers had read and, while that leaves room, reads
// none of their words.
func TestPublishWaitsForSlowestPeer(t *testing.T) {
	path, mb, err := createMailbox(3)
	if err != nil {
		t.Skip(err)
	}
	defer removeMailbox(path)
	defer mb.unmap()
	alive := func() error { return nil }
	peers := []int{1, 2}
	publish := func(seq uint64) error {
		return mb.publish(0, seq, callRecord{desc: "call"}, peers, alive, 20*time.Millisecond)
	}
	for seq := range uint64(mbRing) {
		if err := publish(seq); err != nil {
			t.Fatalf("call %d with the ring not full: %v", seq, err)
		}
	}
	// Rank 1 reads far ahead, rank 2 only the first 10 calls: room for
	// 10 more calls, not 11.
	mb.markConsumed(1, 2*mbRing)
	mb.markConsumed(2, 9)
	for seq := uint64(mbRing); seq < mbRing+10; seq++ {
		if err := publish(seq); err != nil {
			t.Fatalf("call %d, which overwrites a record both peers read: %v", seq, err)
		}
	}
	err = publish(mbRing + 10)
	if err == nil || !strings.Contains(err.Error(), "have not read call 10") {
		t.Fatalf("call %d, which would overwrite call 10 that rank 2 has not read: %v; want it refused, naming call 10", mbRing+10, err)
	}
	mb.markConsumed(2, 2*mbRing)
	if err := publish(mbRing + 10); err != nil {
		t.Fatalf("call %d once every peer read call 10: %v", mbRing+10, err)
	}
}
