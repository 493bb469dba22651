//go:build !unix

package devcomm

// mailbox_other.go: without shared mappings a communicator has no
// mailbox, and every call meets its peers over the bootstrap.

func createMailbox(n int) (string, *mailbox, error) { return "", nil, errNoMailbox }

func openMailbox(path string, n int) (*mailbox, error) { return nil, errNoMailbox }

func removeMailbox(path string) error { return nil }
