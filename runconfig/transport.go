package runconfig

// transport.go: opening what carries a job's port channels between
// processes, as Settings.Transport says.

import (
	"context"
	"fmt"

	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// Carrier is what carries a job's port channels between processes: Net,
// the rank sessions' rankwire.Net, is Wire over fabric, or the job's
// bootstrap itself over tcp (Wire nil). Refused is, under auto, the
// fabric's refusal that left the job on tcp (errors.Is
// fabric.ErrUnreachable where the fabric loaded but a peer did not
// answer), the same on every rank.
type Carrier struct {
	Net     rankwire.Net
	Wire    *fabric.Wire
	Refused error
}

// Close closes the wire (nothing over tcp: the bootstrap is the
// caller's).
func (c Carrier) Close() error {
	if c.Wire == nil {
		return nil
	}
	return c.Wire.Close()
}

// OpenTransport opens what s.Transport says carries the port channels of
// the job on boot, on every rank at once: boot itself (tcp), a libfabric
// wire (fabric: one that does not open is the error), or auto: fabric
// when it opens on every rank and every peer answers its hello within
// s.HelloTimeout, else boot with the fabric's refusal. A transport other
// than tcp, fabric and auto, and auto without a positive HelloTimeout,
// are refused before anything is opened, with errors of type
// *SettingError.
func (s Settings) OpenTransport(ctx context.Context, boot rankwire.Net) (Carrier, error) {
	t, err := s.CheckTransport()
	if err != nil {
		return Carrier{}, err
	}
	o := fabric.Options{Timeout: s.SetupTimeout, TimeoutBound: s.SetupBound}
	if t == fabric.Auto {
		o.HelloTimeout, o.HelloBound = s.HelloTimeout, s.HelloBound
	}
	wire, refused, err := fabric.Choose(ctx, boot, t, o)
	switch {
	case err != nil:
		return Carrier{}, err
	case wire == nil:
		return Carrier{Net: boot, Refused: refused}, nil
	}
	return Carrier{Net: wire, Wire: wire}, nil
}

// CheckTransport checks s.Transport (and, under auto, s.HelloTimeout).
func (s Settings) CheckTransport() (fabric.Transport, error) {
	t, err := fabric.ParseTransport(string(s.Transport))
	if err != nil {
		return "", &SettingError{Setting: SettingTransport, Err: err}
	}
	if t == fabric.Auto && s.HelloTimeout <= 0 {
		return "", &SettingError{Setting: SettingHelloTimeout, Err: fmt.Errorf("%v: want a positive duration", s.HelloTimeout)}
	}
	return t, nil
}

// The settings a SettingError names.
const (
	SettingTransport    = "transport"
	SettingHelloTimeout = "hello timeout"
)

// SettingError is a setting that cannot be used: Setting names which
// (SettingTransport, SettingHelloTimeout), Err says why; the caller
// names the setting its own way (a flag, a variable).
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Err.Error() }

func (e *SettingError) Unwrap() error { return e.Err }
