package gpu

import (
	"encoding/binary"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// TestStateImage: a rank's state block image has each object where
// layoutState (the one ordering, which the kernel's mg_rank pointers
// follow) places it, and zeros everywhere else.
func TestStateImage(t *testing.T) {
	t.Parallel()
	r0 := executor.RankInstance{Rank: 0,
		MemoryChannels: []executor.ChannelEnd{{Peer: 1, PeerIndex: 0}, {Peer: 1, PeerIndex: -1}},
		PortChannels:   []executor.ChannelEnd{{Peer: 1, PeerIndex: 0}},
		Semaphores:     []int64{5, -7},
		Switches: []plan.SwitchGroup{
			{Ranks: []int{1, 0}, Buffer: plan.Output},
			{Ranks: []int{0, 1}, Buffer: plan.Scratch},
		},
	}
	r1 := executor.RankInstance{Rank: 1}
	const state0, inbound1 = 0x10000, 0x20000
	s := &session{ranks: []*rankDev{
		{ri: &r0, state: state0},
		{ri: &r1, rec: mgRank{MemInbound: inbound1}},
	}}
	img := s.stateImage(s.ranks[0])
	sl := layoutState(&r0)
	if uint64(len(img)) != sl.size {
		t.Fatalf("image of %d bytes, layout of %d", len(img), sl.size)
	}
	word := func(off uint64) uint64 { return binary.LittleEndian.Uint64(img[off:]) }
	want := map[uint64]uint64{ // offset: 8-byte word
		sl.memPeer:       inbound1, // channel 0: rank 1's inbound counter 0
		sl.sems:          5,
		sl.sems + 8:      uint64(1<<64 - 7),
		sl.sws:           state0 + sl.members[0],
		sl.sws + 24:      state0 + sl.members[1],
		sl.members[0]:    1 << 32, // members 0, 1 as int32
		sl.members[1]:    1 << 32,
		sl.sws + 16:      2 | uint64(plan.Output)<<32, // members, buffer
		sl.sws + 24 + 16: 2 | uint64(plan.Scratch)<<32,
	}
	for off := uint64(0); off < sl.size; off += 8 {
		if got := word(off); got != want[off] {
			t.Errorf("word at %d: %#x, want %#x", off, got, want[off])
		}
	}
}
