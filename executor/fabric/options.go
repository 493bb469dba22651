package fabric

import (
	"context"
	"time"
)

// Net is what a Wire needs of the job's bootstrap (rankwire.Net).
type Net interface {
	Rank() int
	Size() int
	Send(ctx context.Context, peer int, tag uint32, data []byte) error
	Recv(ctx context.Context, peer int, tag uint32) ([]byte, error)
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
	Context() context.Context
}

// Options configure Open.
type Options struct {
	// Provider names a libfabric provider ("tcp;ofi_rxm", "shm",
	// "verbs;ofi_rxm", "efa"); empty: libfabric's choice, which the
	// FI_PROVIDER variable narrows.
	Provider string
	// Timeout bounds the set-up (every peer answering its hello);
	// default 30 s.
	Timeout time.Duration
	// RingBytes is each per-peer ring (a receive and a send one per
	// peer); default 8 MiB. A message goes in records of up to half a
	// ring.
	RingBytes uint64
}
