//go:build !unix

package cpu

// shm_other.go: hosts without mmap have no multi-process sessions.

import "errors"

type mapping struct{ b []byte }

var errNoShm = errors.New("multi-process sessions need shared memory mappings (a unix host)")

func createMapping(string, uint64) (string, *mapping, error) { return "", nil, errNoShm }
func openMapping(string, uint64) (*mapping, error)           { return nil, errNoShm }
func (m *mapping) release()                                  {}
func reserveMapping(uint64) (*mapping, error)                { return nil, errNoShm }
