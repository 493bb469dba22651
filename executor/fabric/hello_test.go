//go:build cgo

package fabric

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// tamperNet is a hubNet whose first all-gather (the endpoints' records)
// hands every rank a copy of rank 1's record with the port of its
// address changed to one nobody listens on.
type tamperNet struct {
	hubNet
	port  uint16
	round int
}

func (n *tamperNet) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	all, err := n.hubNet.AllGather(ctx, data)
	n.round++
	if err != nil || n.round != 1 {
		return all, err
	}
	var rec record
	if err := json.Unmarshal(all[1], &rec); err != nil || len(rec.Addr) < 8 || binary.LittleEndian.Uint16(rec.Addr) != 2 {
		return all, err // not an IPv4 address: the test skips below
	}
	rec.Addr = append([]byte(nil), rec.Addr...)
	binary.BigEndian.PutUint16(rec.Addr[2:], n.port)
	out := append([][]byte(nil), all...)
	if out[1], err = json.Marshal(rec); err != nil {
		return nil, err
	}
	return out, nil
}

// TestHelloBound: a peer whose address does not answer fails the hello
// within Options.HelloTimeout (not Timeout, set far beyond the test's
// deadline), on every rank with the same error, which matches
// ErrUnreachable and names the bound's setting.
func TestHelloBound(t *testing.T) {
	if _, err := Available("tcp;ofi_rxm"); err != nil {
		t.Skipf("libfabric provider tcp;ofi_rxm not available here (install libfabric1): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	t.Setenv("FI_TCP_IFACE", "lo")
	h := newHub(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			w, err := Open(context.Background(), &tamperNet{hubNet: hubNet{h, r}, port: port},
				Options{Provider: "tcp;ofi_rxm", Timeout: time.Hour, HelloTimeout: time.Second, HelloBound: "the test's bound"})
			if err == nil {
				_ = w.Close()
			}
			errs[r] = err
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("Open waited for Timeout (an hour), not HelloTimeout")
	}
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d opened a wire to an address nobody listens on", r)
		}
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "fabric: reaching the peers failed: ") {
			t.Errorf("rank %d: %v: want ErrUnreachable from the hello", r, err)
		}
		if err.Error() != errs[0].Error() {
			t.Errorf("rank %d says %q, rank 0 %q", r, err, errs[0])
		}
	}
	t.Log(errs[0])
	if !strings.Contains(errs[0].Error(), "no answer within 1s (the test's bound)") {
		t.Errorf("the error does not name the bound: %v", errs[0])
	}
}
