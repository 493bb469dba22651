package fabric

// transport.go: the transport policy, written once for the command line
// and the library: which way carries a job's port channels between
// processes (tcp, fabric or auto), read from MSCCLGO_TRANSPORT or a
// flag, and opened by Choose.

import (
	"context"
	"fmt"
)

// Transport is a way of carrying port channels between processes.
type Transport string

// The transports.
const (
	// TCP is the bootstrap's own connections.
	TCP Transport = "tcp"
	// Fabric is a libfabric wire (FI_PROVIDER picks the provider); a
	// fabric that does not open fails the job.
	Fabric Transport = "fabric"
	// Auto is Fabric where it opens on every rank and every peer answers
	// its hello, else TCP, every rank alike: the default.
	Auto Transport = "auto"
)

// TransportVar is the environment variable that chooses the transport
// (and the command line's --transport default).
const TransportVar = "MSCCLGO_TRANSPORT"

// TransportSetting is the transport that the environment, read by
// getenv (os.Getenv), asks for, unchecked: its TransportVar, or Auto
// where that is unset or empty.
func TransportSetting(getenv func(string) string) string {
	if v := getenv(TransportVar); v != "" {
		return v
	}
	return string(Auto)
}

// ParseTransport checks a transport's name.
func ParseTransport(name string) (Transport, error) {
	switch t := Transport(name); t {
	case TCP, Fabric, Auto:
		return t, nil
	}
	return "", fmt.Errorf("%q: want tcp, fabric or auto", name)
}

// Choose opens what t says carries the port channels of the job on net:
// nil for TCP (the caller keeps net itself), or a Wire. Under Auto a
// fabric that does not open is no error: Choose returns a nil Wire and
// the fabric's error as refused, the same on every rank (errors.Is
// ErrUnreachable where the fabric loaded but a peer did not answer), for
// the caller to report. Under Fabric, it is the error.
func Choose(ctx context.Context, net Net, t Transport, o Options) (wire *Wire, refused, err error) {
	if t == TCP {
		return nil, nil, nil
	}
	w, err := Open(ctx, net, o)
	if err != nil {
		if t == Auto {
			return nil, err, nil
		}
		return nil, nil, err
	}
	return w, nil, nil
}
