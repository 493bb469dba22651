// This file tests the grouping of ranks per host.

package bootstrap

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGroupHosts(t *testing.T) {
	p := func(rank int, host string, lr, ls int) Peer {
		return Peer{Rank: rank, Host: host, LocalRank: lr, LocalSize: ls}
	}
	tests := []struct {
		name  string
		peers []Peer
		want  []Host
	}{
		{"one host, no local info", []Peer{p(0, "a", 0, 0), p(1, "a", 0, 0)}, []Host{{"a", []int{0, 1}}}},
		{"two hosts by name", []Peer{p(0, "a", 0, 0), p(1, "b", 0, 0), p(2, "a", 0, 0), p(3, "b", 0, 0)},
			[]Host{{"a", []int{0, 2}}, {"b", []int{1, 3}}}},
		{"ordered by local rank", []Peer{p(0, "a", 1, 2), p(1, "a", 0, 2)}, []Host{{"a", []int{1, 0}}}},
		{"same name, block mapping", []Peer{p(0, "localhost", 0, 2), p(1, "localhost", 1, 2), p(2, "localhost", 0, 2), p(3, "localhost", 1, 2)},
			[]Host{{"localhost#0", []int{0, 1}}, {"localhost#1", []int{2, 3}}}},
		{"same name, round robin", []Peer{p(0, "c", 0, 2), p(1, "c", 0, 2), p(2, "c", 1, 2), p(3, "c", 1, 2)},
			[]Host{{"c#0", []int{0, 2}}, {"c#1", []int{1, 3}}}},
		{"partial local info falls back to names", []Peer{p(0, "a", 0, 2), p(1, "a", 0, 0)}, []Host{{"a", []int{0, 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, groupHosts(tc.peers)); diff != "" {
				t.Errorf("groupHosts (-want +got):\n%s", diff)
			}
		})
	}
}
