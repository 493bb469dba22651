// This file holds the wire format: the 24-byte frame header, reading and
// writing frames, and the payload encodings of the handshake messages
// (challenge, hello, rank table, peer hello).

package bootstrap

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"time"
)

const (
	frameMagic   = "MSGO"    // the first four bytes of every frame
	frameVersion = 2         // the protocol version this build speaks
	headerSize   = 24        // bytes of a frame header
	handshakeMax = 64 << 10  // limit of a handshake frame (hello, peer hello)
	maxString    = 1024      // longest host name or address in a handshake
	writeChunk   = 1 << 20   // bytes written per deadline on control links
	readBuffer   = 64 << 10  // bufio size of every link
	tableEntry   = 12 + 2048 // upper bound of one rank table entry
	bigPayload   = 256 << 20 // payloads above this are allocated as they arrive
)

// kind is a frame's type.
type kind uint8

// The frame kinds. Their numbers are part of the protocol.
const (
	kindHello      kind = 1  // rank -> rank 0: join (hello payload)
	kindTable      kind = 2  // rank 0 -> rank: the rank table (table payload)
	kindPeerHello  kind = 3  // dialer -> peer: first frame of a data link
	kindFail       kind = 4  // refusal or collective failure; payload: message
	kindGather     kind = 5  // rank -> rank 0: allgather contribution; tag: sequence
	kindGatherPart kind = 6  // rank 0 -> rank: one rank's blob; tag: sequence, arg: its rank
	kindBarrier    kind = 7  // rank -> rank 0: barrier arrival; tag: sequence
	kindRelease    kind = 8  // rank 0 -> rank: barrier release; tag: sequence
	kindData       kind = 9  // Send: tag: the user's tag
	kindPing       kind = 10 // heartbeat on a control link
	kindLost       kind = 11 // rank 0 -> rank: arg: lost rank; payload: reason
	kindBye        kind = 12 // clean close of one direction of a link
	kindAuth       kind = 13 // rank -> rank 0: its challenge; rank 0 -> rank: its challenge and proof
)

// String names a kind in error messages.
func (k kind) String() string {
	names := [...]string{"", "hello", "table", "peer hello", "fail", "gather", "gather part",
		"barrier", "release", "data", "ping", "lost", "bye", "challenge"}
	if int(k) < len(names) && k != 0 {
		return names[k]
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// header is a decoded frame header.
type header struct {
	kind kind
	tag  uint32 // Send/Recv tag, or collective sequence number
	arg  uint32 // a rank: the owner of a gather part, the lost rank
	n    uint64 // payload length
}

// encode lays the header out as on the wire.
func (h header) encode() []byte {
	b := make([]byte, headerSize)
	copy(b, frameMagic)
	b[4] = frameVersion
	b[5] = byte(h.kind)
	binary.BigEndian.PutUint32(b[8:], h.tag)
	binary.BigEndian.PutUint32(b[12:], h.arg)
	binary.BigEndian.PutUint64(b[16:], h.n)
	return b
}

// decodeHeader checks and decodes a header.
func decodeHeader(b []byte) (header, error) {
	if string(b[:4]) != frameMagic {
		return header{}, fmt.Errorf("%w: magic %q, want %q", ErrBadFrame, b[:4], frameMagic)
	}
	if b[4] != frameVersion {
		return header{}, fmt.Errorf("%w: protocol version %d, this build speaks %d", ErrBadFrame, b[4], frameVersion)
	}
	k := kind(b[5])
	if k < kindHello || k > kindAuth {
		return header{}, fmt.Errorf("%w: unknown frame kind %d", ErrBadFrame, b[5])
	}
	if b[6] != 0 || b[7] != 0 {
		return header{}, fmt.Errorf("%w: reserved bytes %#x, want 0", ErrBadFrame, b[6:8])
	}
	return header{
		kind: k,
		tag:  binary.BigEndian.Uint32(b[8:]),
		arg:  binary.BigEndian.Uint32(b[12:]),
		n:    binary.BigEndian.Uint64(b[16:]),
	}, nil
}

// readFrame reads one frame, refusing a payload longer than max before
// allocating it. The payload is never nil.
func readFrame(r io.Reader, max uint64) (header, []byte, error) {
	var hb [headerSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, nil, err
	}
	h, err := decodeHeader(hb[:])
	if err != nil {
		return header{}, nil, err
	}
	if h.n > max {
		return h, nil, fmt.Errorf("%w: %s frame of %d bytes, limit %d", ErrFrameTooLarge, h.kind, h.n, max)
	}
	p, err := readPayload(r, h.n, bigPayload)
	return h, p, err
}

// readPayload reads n bytes. Up to first bytes it allocates them at once;
// beyond, the buffer grows (doubling) as bytes arrive, so that a length
// announced by a broken or hostile peer costs memory only for the bytes
// it actually sends. readFrame passes bigPayload.
func readPayload(r io.Reader, n, first uint64) ([]byte, error) {
	unexpected := func(err error) error {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if n <= first {
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, unexpected(err)
		}
		return p, nil
	}
	p := make([]byte, 0, first)
	for uint64(len(p)) < n {
		if len(p) == cap(p) {
			p = slices.Grow(p, int(min(uint64(cap(p)), n-uint64(len(p)))))
		}
		m, err := io.ReadFull(r, p[len(p):min(uint64(cap(p)), n)])
		p = p[:len(p)+m]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return p, nil
}

// writeFrame writes one frame. With idle > 0 every chunk of writeChunk
// bytes must be accepted within idle; with idle 0 there is no deadline
// and header and payload go in one vectored write. It returns the number
// of bytes written.
func writeFrame(c net.Conn, h header, p []byte, idle time.Duration) (int64, error) {
	h.n = uint64(len(p))
	hb := h.encode()
	if idle <= 0 {
		bufs := net.Buffers{hb, p}
		return bufs.WriteTo(c)
	}
	var n int64
	first := true
	for first || len(p) > 0 {
		m := min(len(p), writeChunk)
		if err := c.SetWriteDeadline(time.Now().Add(idle)); err != nil {
			return n, err
		}
		bufs := net.Buffers{p[:m]}
		if first {
			bufs = net.Buffers{hb, p[:m]}
			first = false
		}
		k, err := bufs.WriteTo(c)
		n += k
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// hello is the first frame of a rank on its control link.
type hello struct {
	rank, size           uint32
	localRank, localSize int32
	host, addr           string // host name, and the address this rank listens on
	proof                []byte // HMAC of the fields (see join proofs in setup.go)
}

// peerHello is the first frame of a data link.
type peerHello struct {
	rank, size uint32
	session    uint64 // the session of the rank table
}

// enc appends big-endian fields.
type enc []byte

func (e *enc) u32(v uint32) { *e = binary.BigEndian.AppendUint32(*e, v) }
func (e *enc) u64(v uint64) { *e = binary.BigEndian.AppendUint64(*e, v) }
func (e *enc) str(s string) {
	*e = binary.BigEndian.AppendUint16(*e, uint16(len(s)))
	*e = append(*e, s...)
}

// dec reads big-endian fields, remembering the first shortfall.
type dec struct {
	b   []byte
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: payload truncated", ErrBadFrame)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *dec) str() string {
	v := d.take(2)
	if v == nil {
		return ""
	}
	n := int(binary.BigEndian.Uint16(v))
	if n > maxString && d.err == nil {
		d.err = fmt.Errorf("%w: string of %d bytes, limit %d", ErrBadFrame, n, maxString)
		return ""
	}
	return string(d.take(n))
}

// done reports the first error, or trailing bytes.
func (d *dec) done() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d trailing payload bytes", ErrBadFrame, len(d.b))
	}
	return d.err
}

// fields lays out the hello without its proof: what the proof covers.
func (h hello) fields() []byte {
	var e enc
	e.u32(h.rank)
	e.u32(h.size)
	e.u32(uint32(h.localRank))
	e.u32(uint32(h.localSize))
	e.str(h.host)
	e.str(h.addr)
	return e
}

// encode lays out the fields, then the proof (proofSize bytes).
func (h hello) encode() []byte {
	proof := make([]byte, proofSize)
	copy(proof, h.proof)
	return append(h.fields(), proof...)
}

func decodeHello(p []byte) (hello, error) {
	if len(p) < proofSize {
		return hello{}, fmt.Errorf("%w: payload truncated", ErrBadFrame)
	}
	d := dec{b: p[:len(p)-proofSize]}
	h := hello{rank: d.u32(), size: d.u32(), localRank: int32(d.u32()), localSize: int32(d.u32()), host: d.str(), addr: d.str(),
		proof: slices.Clone(p[len(p)-proofSize:])}
	return h, d.done()
}

func (h peerHello) encode() []byte {
	var e enc
	e.u32(h.rank)
	e.u32(h.size)
	e.u64(h.session)
	return e
}

func decodePeerHello(p []byte) (peerHello, error) {
	d := dec{b: p}
	h := peerHello{rank: d.u32(), size: d.u32(), session: d.u64()}
	return h, d.done()
}

// encodeTable lays out the rank table: the session, the count, and per
// rank its local rank, local size, host and address.
func encodeTable(session uint64, peers []Peer) []byte {
	var e enc
	e.u64(session)
	e.u32(uint32(len(peers)))
	for _, p := range peers {
		e.u32(uint32(int32(p.LocalRank)))
		e.u32(uint32(int32(p.LocalSize)))
		e.str(p.Host)
		e.str(p.Addr)
	}
	return e
}

func decodeTable(p []byte) (uint64, []Peer, error) {
	d := dec{b: p}
	session := d.u64()
	n := d.u32()
	if d.err == nil && uint64(n)*12 > uint64(len(d.b)) {
		return 0, nil, fmt.Errorf("%w: rank table of %d entries in %d bytes", ErrBadFrame, n, len(p))
	}
	peers := make([]Peer, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		peers = append(peers, Peer{Rank: int(i), LocalRank: int(int32(d.u32())), LocalSize: int(int32(d.u32())), Host: d.str(), Addr: d.str()})
	}
	return session, peers, d.done()
}
