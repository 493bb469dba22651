package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
)

// idBytes is the size of an ncclUniqueId.
const idBytes = 128

// idMagic starts every unique id this library makes.
var idMagic = [8]byte{'M', 'S', 'C', 'C', 'L', 'G', 'O', 1}

// uniqueID is what an ncclUniqueId carries: rank 0's bootstrap address
// and the job token every rank's hello must carry.
//
//	offset size  field
//	0      8     "MSCCLGO" 0x01
//	8      16    token (random)
//	24     2     address length n, big-endian
//	26     n     rank 0's host:port
type uniqueID struct {
	token [16]byte
	addr  string
}

// maxAddr is the longest address an id holds.
const maxAddr = idBytes - 26

func (u uniqueID) encode() ([idBytes]byte, error) {
	var b [idBytes]byte
	if len(u.addr) > maxAddr {
		return b, fmt.Errorf("bootstrap address %q longer than %d bytes", u.addr, maxAddr)
	}
	copy(b[0:8], idMagic[:])
	copy(b[8:24], u.token[:])
	binary.BigEndian.PutUint16(b[24:26], uint16(len(u.addr)))
	copy(b[26:], u.addr)
	return b, nil
}

// decodeID reads an ncclUniqueId; the error says what is wrong with it.
func decodeID(b []byte) (uniqueID, error) {
	var u uniqueID
	if len(b) != idBytes {
		return u, fmt.Errorf("unique id of %d bytes, want %d", len(b), idBytes)
	}
	if !bytes.Equal(b[0:8], idMagic[:]) {
		return u, fmt.Errorf("unique id starting %x was not made by this library's ncclGetUniqueId (it starts %x)", b[0:8], idMagic[:])
	}
	copy(u.token[:], b[8:24])
	n := int(binary.BigEndian.Uint16(b[24:26]))
	if n == 0 || n > maxAddr {
		return u, fmt.Errorf("unique id with an address of %d bytes (1 to %d)", n, maxAddr)
	}
	u.addr = string(b[26 : 26+n])
	if _, _, err := net.SplitHostPort(u.addr); err != nil {
		return u, fmt.Errorf("unique id with address %q: %v", u.addr, err)
	}
	return u, nil
}

// short names the id in messages: its token's first bytes and rank 0's
// address.
func (u uniqueID) short() string { return fmt.Sprintf("%x… (rank 0 at %s)", u.token[:4], u.addr) }

// tokenString is the job token of the bootstrap (bootstrap.World.Token).
func (u uniqueID) tokenString() string { return hex.EncodeToString(u.token[:]) }

// newID opens a bootstrap listener for rank 0 on this host and returns the
// id that names it. The listener waits in the library until the rank 0 of
// this id joins from this process.
func newID(host string) (uniqueID, net.Listener, error) {
	var u uniqueID
	if _, err := rand.Read(u.token[:]); err != nil {
		return u, nil, fmt.Errorf("random token: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return u, nil, fmt.Errorf("bootstrap listener on %s: %w", host, err)
	}
	u.addr = ln.Addr().String()
	return u, ln, nil
}

// bootstrapHost is the address ranks reach this host at:
// MSCCLGO_NCCL_BOOTSTRAP_HOST if set, else the first non-loopback IPv4
// address of an interface that is up, else 127.0.0.1.
func bootstrapHost() string {
	if h := os.Getenv("MSCCLGO_NCCL_BOOTSTRAP_HOST"); h != "" {
		return h
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
