package fabric

import (
	"context"
	"errors"
	"time"
)

// DefaultAutoHelloTimeout is the hello bound the callers use under
// --transport auto (and MSCCLGO_TRANSPORT=auto): peers on one fabric
// answer a hello in milliseconds, so seconds without an answer mean an
// unreachable address, and the job goes on over tcp.
const DefaultAutoHelloTimeout = 5 * time.Second

// ErrUnreachable is what Open's error matches (errors.Is) when the
// fabric opened on every rank but some peer did not answer its hello:
// an address that does not route. Every rank gets it, with the same
// text, so every rank can take the same other way.
var ErrUnreachable = errors.New("fabric: a peer did not answer its hello")

// setupError is a set-up step that failed on some rank, as every rank
// learnt it from the all-gather (the same text everywhere).
type setupError struct {
	step string
	msg  string
}

func (e *setupError) Error() string { return e.msg }

// Is says a failed hello is ErrUnreachable.
func (e *setupError) Is(target error) bool { return target == ErrUnreachable && e.step == stepHello }

// The set-up step of the hello.
const stepHello = "reaching the peers"

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
	// Timeout bounds each wait of the set-up for the peers (each of its
	// exchanges, every peer answering its hello), counted from when this
	// rank starts it; default 30 s. TimeoutBound names its setting in
	// the error of a wait that ran out ("MSCCLGO_NCCL_TIMEOUT"); empty:
	// none is named.
	Timeout      time.Duration
	TimeoutBound string
	// HelloTimeout, when set, bounds the hello alone (every peer
	// answering the first write) in place of Timeout: a caller that has
	// another way to carry the job (--transport auto) gives up an
	// unreachable fabric after it rather than after the whole Timeout.
	// The hello's error then says which bound ran out (HelloBound).
	HelloTimeout time.Duration
	// HelloBound names HelloTimeout's setting in the error of a peer
	// that did not answer in time ("--fabric-hello-timeout"); empty:
	// none is named.
	HelloBound string
	// RingBytes is each per-peer ring (a receive and a send one per
	// peer); default 8 MiB. A message goes in records of up to half a
	// ring.
	RingBytes uint64
}
