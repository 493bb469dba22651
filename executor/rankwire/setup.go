package rankwire

// setup.go holds what the rank sessions of both backends do at set-up:
// all-gather each rank's record (its memory handles, or its error) so
// that one rank's failure fails every rank with the same message, and
// check that a plan joins ranks of different hosts by port channels only.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
)

// Gatherer is the bootstrap's all-gather.
type Gatherer interface {
	Rank() int
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
}

// GatherSetup all-gathers mine (JSON) and returns every rank's record,
// or, if any rank's errOf is not empty, an error that lists them all:
// the same error on every rank.
func GatherSetup[T any](ctx context.Context, nt Gatherer, mine T, errOf func(*T) string, step string) ([]T, error) {
	data, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	parts, err := nt.AllGather(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %s: %w", nt.Rank(), step, err)
	}
	all := make([]T, len(parts))
	var errs []string
	for r, p := range parts {
		if err := json.Unmarshal(p, &all[r]); err != nil {
			return nil, fmt.Errorf("%s: rank %d sent %d bytes that are not a set-up record: %v", step, r, len(p), err)
		}
		if e := errOf(&all[r]); e != "" {
			errs = append(errs, fmt.Sprintf("rank %d: %s", r, e))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s failed: %s", step, strings.Join(errs, "; "))
	}
	return all, nil
}

// CheckLocality reports a memory channel or switch group of rank that
// reaches a rank on another host (host[r] numbers rank r's host): only
// port channels cross hosts.
func CheckLocality(inst *executor.Instance, rank int, host []int) error {
	ri := &inst.Ranks[rank]
	for c, end := range ri.MemoryChannels {
		if host[end.Peer] != host[rank] {
			return fmt.Errorf("memory channel %d of rank %d goes to rank %d on another host; only port channels cross hosts", c, rank, end.Peer)
		}
	}
	for g, sw := range ri.Switches {
		for _, p := range sw.Ranks {
			if host[p] != host[rank] {
				return fmt.Errorf("switch channel %d of rank %d groups rank %d on another host; NVLS groups stay on one host", g, rank, p)
			}
		}
	}
	return nil
}
