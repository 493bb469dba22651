// This file tests the wire format: header round trips, every refusal of
// readFrame, and the handshake payload encodings.

package bootstrap

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFrameRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	frames := []struct {
		h header
		p []byte
	}{
		{header{kind: kindData, tag: 7, arg: 3}, []byte("hello")},
		{header{kind: kindPing}, nil},
		{header{kind: kindGatherPart, tag: 1 << 31, arg: 1<<32 - 1}, bytes.Repeat([]byte{0xab}, 3*writeChunk+5)},
	}
	for _, idle := range []time.Duration{0, time.Minute} {
		go func() {
			for _, f := range frames {
				if _, err := writeFrame(a, f.h, f.p, idle); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for _, f := range frames {
			h, p, err := readFrame(b, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			want := f.h
			want.n = uint64(len(f.p))
			if h != want || !bytes.Equal(p, f.p) || p == nil {
				t.Errorf("idle %v: got %+v (%d bytes), want %+v (%d bytes)", idle, h, len(p), want, len(f.p))
			}
		}
	}
}

func TestReadFrameRefusals(t *testing.T) {
	good := header{kind: kindData, n: 4}.encode()
	patch := func(i int, v byte) []byte {
		b := append([]byte{}, good...)
		b[i] = v
		return b
	}
	tests := []struct {
		name string
		in   []byte
		max  uint64
		is   error
		want string
	}{
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 100, ErrBadFrame, `magic "GET ", want "MSGO"`},
		{"old version", patch(4, 1), 100, ErrBadFrame, "protocol version 1, this build speaks 2"},
		{"new version", patch(4, 3), 100, ErrBadFrame, "protocol version 3, this build speaks 2"},
		{"kind 0", patch(5, 0), 100, ErrBadFrame, "unknown frame kind 0"},
		{"kind 200", patch(5, 200), 100, ErrBadFrame, "unknown frame kind 200"},
		{"reserved", patch(7, 1), 100, ErrBadFrame, "reserved bytes"},
		{"too large", header{kind: kindData, n: 1 << 40}.encode(), 1 << 30, ErrFrameTooLarge, "data frame of 1099511627776 bytes, limit 1073741824"},
		{"truncated header", good[:10], 100, io.ErrUnexpectedEOF, ""},
		{"truncated payload", append(append([]byte{}, good...), 'x'), 100, io.ErrUnexpectedEOF, ""},
		{"empty", nil, 100, io.EOF, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readFrame(bytes.NewReader(tc.in), tc.max)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("readFrame: %v, want %v containing %q", err, tc.is, tc.want)
			}
		})
	}
}

func TestHandshakePayloads(t *testing.T) {
	h := hello{rank: 5, size: 8, localRank: -1, localSize: 0, host: "node7", addr: "10.0.0.7:4000", proof: bytes.Repeat([]byte{7}, proofSize)}
	got, err := decodeHello(h.encode())
	if err != nil || !cmp.Equal(got, h, cmp.AllowUnexported(hello{})) {
		t.Errorf("hello: got %+v, %v, want %+v", got, err, h)
	}
	ph := peerHello{rank: 1, size: 2, session: 0xdeadbeefcafe}
	if got, err := decodePeerHello(ph.encode()); err != nil || got != ph {
		t.Errorf("peer hello: got %+v, %v, want %+v", got, err, ph)
	}
	peers := []Peer{{Rank: 0, Host: "a", Addr: "a:1", LocalRank: 0, LocalSize: 2}, {Rank: 1, Host: "a", Addr: "a:2", LocalRank: 1, LocalSize: 2}}
	session, gotPeers, err := decodeTable(encodeTable(42, peers))
	if err != nil || session != 42 {
		t.Fatalf("table: session %d, %v", session, err)
	}
	if diff := cmp.Diff(peers, gotPeers); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	for name, p := range map[string][]byte{
		"truncated hello":   h.encode()[:9],
		"trailing bytes":    append(h.encode(), 0),
		"huge table count":  {0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff},
		"string over limit": append(bytes.Repeat([]byte{0}, 16), append([]byte{0xff, 0xff}, make([]byte, proofSize)...)...),
		"no proof":          h.fields(),
	} {
		var err error
		if strings.Contains(name, "table") {
			_, _, err = decodeTable(p)
		} else {
			_, err = decodeHello(p)
		}
		if !errors.Is(err, ErrBadFrame) {
			t.Errorf("%s: %v, want ErrBadFrame", name, err)
		}
	}
}

// TestReadPayloadGrows reads payloads past the size allocated at once:
// complete ones, and one whose sender stops short of the announced
// length.
func TestReadPayloadGrows(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, n := range []int{16, 17, 100, 1000} {
		p, err := readPayload(bytes.NewReader(data[:n]), uint64(n), 16)
		if err != nil || !bytes.Equal(p, data[:n]) {
			t.Errorf("n=%d: %d bytes, %v", n, len(p), err)
		}
	}
	if _, err := readPayload(bytes.NewReader(data[:100]), 1<<40, 16); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short payload: %v, want io.ErrUnexpectedEOF", err)
	}
}
