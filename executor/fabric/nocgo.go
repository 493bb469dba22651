//go:build !cgo

package fabric

import (
	"context"
	"errors"
)

// errNoCgo is Open's answer in a build without cgo.
var errNoCgo = errors.New("fabric: this mscclgo was built without cgo: libfabric cannot be loaded (use --transport tcp)")

// Wire is not available without cgo.
type Wire struct{ Net }

// Open refuses: no cgo.
func Open(context.Context, Net, Options) (*Wire, error) { return nil, errNoCgo }

// Available refuses: no cgo.
func Available(string) (string, error) { return "", errNoCgo }

// Provider is empty.
func (w *Wire) Provider() string { return "" }

// TransportName is empty.
func (w *Wire) TransportName() string { return "" }

// Close does nothing.
func (w *Wire) Close() error { return nil }

// SendPort refuses.
func (w *Wire) SendPort(context.Context, int, uint32, []byte, []byte) error { return errNoCgo }

// SendPort2 refuses.
func (w *Wire) SendPort2(context.Context, int, uint32, []byte, []byte, []byte) error { return errNoCgo }

// RecvPort refuses.
func (w *Wire) RecvPort(context.Context, int, uint32) ([]byte, []byte, error) {
	return nil, nil, errNoCgo
}
