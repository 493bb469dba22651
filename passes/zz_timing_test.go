package passes

import (
	"runtime"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/ir"
)

func TestZZTiming(t *testing.T) {
	for i := 0; i < 3; i++ {
		p := syntheticProgram(64, 64, 50, 1)
		n := 0
		for _, g := range p.GPUs {
			for _, tb := range g.ThreadBlocks {
				n += len(tb.Ops)
			}
		}
		runtime.GC()
		start := time.Now()
		if err := Run(p, Config{}); err != nil {
			t.Fatal(err)
		}
		m := 0
		for _, g := range p.GPUs {
			for _, tb := range g.ThreadBlocks {
				m += len(tb.Ops)
			}
		}
		t.Logf("ops=%d -> %d total=%v", n, m, time.Since(start))
	}
}

func BenchmarkZZResolve(b *testing.B) {
	p := syntheticProgram(64, 64, 50, 1)
	p.AutoSync = false
	Run(p, Config{Disabled: map[string]bool{"replicate": true}})
	runtime.GC()
	b.ResetTimer()
	for b.Loop() {
		var s state
		for _, g := range p.GPUs {
			for _, tb := range g.ThreadBlocks {
				s.resolveTB(tb.Ops)
			}
		}
	}
}
func BenchmarkZZFuse(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		p := syntheticProgram(64, 64, 50, 1)
		runtime.GC()
		b.StartTimer()
		for _, g := range p.GPUs {
			for _, tb := range g.ThreadBlocks {
				Fuse(tb.Ops)
			}
		}
	}
}
var _ = ir.Nop

func TestZZFloor(t *testing.T) {
	p := syntheticProgram(64, 64, 50, 1)
	runtime.GC()
	for i := 0; i < 3; i++ {
		start := time.Now()
		k := 0
		for _, g := range p.GPUs {
			for _, tb := range g.ThreadBlocks {
				for _, o := range tb.Ops {
					k += int(o.Kind)
				}
			}
		}
		d1 := time.Since(start)
		start = time.Now()
		for _, g := range p.GPUs {
			for _, tb := range g.ThreadBlocks {
				for _, o := range tb.Ops {
					if len(o.Src) > 0 {
						k += o.Src[0].Index
					}
					if len(o.LocalSrc) > 0 {
						k += o.LocalSrc[0].Index
					}
				}
			}
		}
		t.Logf("kind pass %v, src pass %v (%d)", d1, time.Since(start), k)
	}
}
