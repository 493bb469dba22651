//go:build !unix

package memlimit

// addressLimit returns 0: no address-space limit is known here.
func addressLimit() uint64 { return 0 }
