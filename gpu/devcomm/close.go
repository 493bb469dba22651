package devcomm

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
)

// Close waits for the running launches (at most the deadlock timeout and
// a margin each), then releases every session and registration.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.mb != nil {
		// The peers waiting for a call this rank will not make stop
		// waiting (mailbox.gone).
		atomic.StoreUint64(c.mb.ended(c.rank), c.calls+1)
	}
	errs := slices.Clone(c.leaked)
	// The replay watch reads the captured sessions' records and may
	// raise their abort words: it ends before their memory is freed, and
	// a replay still running is stopped here (its session's memory kept
	// where it does not end).
	c.stopWatchingReplays()
	if err := c.stopReplaysLocked("close"); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.closeSessions()...)
	errs = append(errs, c.stopGates()...)
	if len(errs) == 0 {
		// (A launch that did not end may still copy to or from the
		// peers' buffers, or read the staging buffer: they stay then,
		// as its own memory stays, rather than go under a running copy.)
		c.reg.unmapPeers()
		if c.io != nil {
			if err := c.freeStaging(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	c.reg.mapped, c.reg.stale = nil, nil
	errs = append(errs, c.release(len(errs) > 0)...)
	return errors.Join(errs...)
}

// closeSessions closes every session once its launches have ended; one
// whose launch does not end keeps its memory until the process ends.
func (c *Comm) closeSessions() []error {
	var errs []error
	for key, cs := range c.sessions {
		cs.server.stop()
		if err := cs.wait(c.waitBound(cs)); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %s: %w (its memory stays until the process ends)", c.cfg.Name, c.rank, key, err))
			continue
		}
		if err := cs.ss.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, key, err))
		}
	}
	c.sessions = nil
	return errs
}

// stopGates sends this rank's last records to the remote peers, whose
// last gates wait for them, and ends the gate server: the holds left (a
// session whose launch did not end) are released aborted, the
// communicator's end failing their calls.
func (c *Comm) stopGates() []error {
	var errs []error
	if c.rc != nil && c.ctx.Err() == nil {
		if err := c.rc.flush(c.cfg.SetupTimeout); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %w", c.cfg.Name, c.rank, err))
		}
	}
	if c.gates != nil {
		c.cancel()
		if err := c.gates.close(c.cfg.SetupTimeout); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %w", c.cfg.Name, c.rank, err))
		}
	}
	return errs
}

// release ends the communicator's context and exchange with the remote
// peers, unmaps the mailbox unless keep (a launch that did not end, or a
// receiver of the remote peers' records that did not, may still use it)
// and closes the driver.
func (c *Comm) release(keep bool) []error {
	var errs []error
	c.cancel()
	if c.rc != nil {
		if err := c.rc.stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %w", c.cfg.Name, c.rank, err))
			keep = true
		}
	}
	if c.mb != nil && !keep {
		_ = c.mb.unmap()
		c.mb, c.reg.mb = nil, nil
	}
	if c.io != nil {
		_ = c.io.Close()
	}
	return errs
}
