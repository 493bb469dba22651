//go:build cgo

package gpu

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/gpu/internal/clayout"
)

// goFields lists the Go mirrors' records and fields with the offsets
// encode writes them at (binary.Write packs fields in order).
func goFields() []clayout.Field {
	var out []clayout.Field
	for _, v := range []any{mgRegion{}, mgOp{}, mgBlock{}, mgSwitch{}, mgBarrier{}, mgTrigger{}, mgFifo{},
		mgRank{}, mgProgress{}, mgControl{}, mgArgs{}, mgShared{}, mgVTerm{}, mgVTable{}} {
		t := reflect.TypeOf(v)
		out = append(out, clayout.Field{Type: t.Name(), Size: binary.Size(v)})
		off := 0
		for i := 0; i < t.NumField(); i++ {
			f := reflect.ValueOf(v).Field(i).Interface()
			n := binary.Size(f)
			out = append(out, clayout.Field{Type: t.Name(), Field: t.Field(i).Name, Offset: off, Size: n})
			off += n
		}
	}
	return out
}

// TestLayoutMatchesC checks every record size and field offset of the Go
// mirrors against the C compiler's view of layout.h, and the size
// constants of layout.go.
func TestLayoutMatchesC(t *testing.T) {
	if diff := cmp.Diff(clayout.Fields(), goFields()); diff != "" {
		t.Errorf("Go mirrors differ from layout.h (-C +Go):\n%s", diff)
	}
	for _, c := range []struct {
		v    any
		want int
	}{{mgRegion{}, sizeRegion}, {mgOp{}, sizeOp}, {mgBlock{}, sizeBlock}, {mgSwitch{}, sizeSwitch},
		{mgBarrier{}, sizeBarrier}, {mgFifo{}, sizeFifo}, {mgRank{}, sizeRank}, {mgProgress{}, sizeProgress},
		{mgControl{}, sizeControl}, {mgArgs{}, sizeArgs}, {mgShared{}, sizeShared},
		{mgVTerm{}, sizeVTerm}, {mgVTable{}, sizeVTable}} {
		if got := binary.Size(c.v); got != c.want {
			t.Errorf("%T: binary size %d, layout.go says %d", c.v, got, c.want)
		}
	}
}
