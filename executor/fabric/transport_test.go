//go:build cgo

package fabric

import (
	"context"
	"testing"
	"time"
)

// TestTransportSetting: unset means auto; a set value is passed on as
// it is, for ParseTransport to judge.
func TestTransportSetting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ env, want string }{{"", "auto"}, {"tcp", "tcp"}, {"bogus", "bogus"}} {
		got := TransportSetting(func(k string) string {
			if k != TransportVar {
				t.Errorf("read %q, want %q", k, TransportVar)
			}
			return tt.env
		})
		if got != tt.want {
			t.Errorf("%s=%q: setting %q, want %q", TransportVar, tt.env, got, tt.want)
		}
	}
}

func TestParseTransport(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"tcp", "fabric", "auto"} {
		if got, err := ParseTransport(name); err != nil || string(got) != name {
			t.Errorf("ParseTransport(%q) = %q, %v", name, got, err)
		}
	}
	for _, name := range []string{"", "TCP", "ib"} {
		_, err := ParseTransport(name)
		if err == nil || err.Error() != `"`+name+`": want tcp, fabric or auto` {
			t.Errorf("ParseTransport(%q): error %v, want one naming the value and the choices", name, err)
		}
	}
}

// TestChooseTCP: tcp opens nothing and is never refused.
func TestChooseTCP(t *testing.T) {
	t.Parallel()
	w, refused, err := Choose(context.Background(), nil, TCP, Options{})
	if w != nil || refused != nil || err != nil {
		t.Errorf("Choose(tcp) = %v, %v, %v; want nothing", w, refused, err)
	}
}

// TestChooseAutoFallsBack: a fabric that cannot open (a provider that
// does not exist, or no libfabric at all) is the refusal under auto and
// the error under fabric.
func TestChooseAutoFallsBack(t *testing.T) {
	t.Parallel()
	net := hubNet{newHub(1), 0}
	o := Options{Provider: "mscclgo-no-such-provider", Timeout: 10 * time.Second}
	w, refused, err := Choose(context.Background(), net, Auto, o)
	if w != nil || refused == nil || err != nil {
		t.Fatalf("Choose(auto) = %v, %v, %v; want a refusal and no error", w, refused, err)
	}
	w, refused2, err := Choose(context.Background(), net, Fabric, o)
	if w != nil || refused2 != nil || err == nil {
		t.Fatalf("Choose(fabric) = %v, %v, %v; want the error", w, refused2, err)
	}
	if err.Error() != refused.Error() {
		t.Errorf("fabric's error %q, auto's refusal %q: want the same", err, refused)
	}
}
