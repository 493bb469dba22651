package install

import (
	"path/filepath"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/algorithms"
)

// BenchmarkInstallDefaultSet installs the whole default set, as `mscclgo
// install` does: "cold" validates every plan (no validation cache),
// "warm" finds every plan in a validation cache filled beforehand. Besides
// time and allocations per install it reports peak-MB, the most memory
// the Go runtime held from the OS (heap, stacks and runtime structures,
// less what it returned) during the installs, sampled every 5 ms.
//
//	go test ./planset -run '^$' -bench InstallDefaultSet -benchtime 3x
func BenchmarkInstallDefaultSet(b *testing.B) {
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cold", func(b *testing.B) {
		dir := b.TempDir()
		b.ReportAllocs()
		peak := samplePeak(b)
		for b.Loop() {
			if _, err := Install(jobs, Options{Dir: filepath.Join(dir, "plans")}); err != nil {
				b.Fatal(err)
			}
		}
		peak()
	})
	b.Run("warm", func(b *testing.B) {
		dir := b.TempDir()
		opts := Options{Dir: filepath.Join(dir, "plans"), CacheDir: filepath.Join(dir, "validated"), Version: "bench"}
		if _, err := Install(jobs, opts); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		peak := samplePeak(b)
		for b.Loop() {
			if _, err := Install(jobs, opts); err != nil {
				b.Fatal(err)
			}
		}
		peak()
	})
}

// samplePeak samples the Go runtime's memory until the returned function
// is called, which reports the peak as the metric peak-MB.
func samplePeak(b *testing.B) func() {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	var peak uint64
	read := func() {
		metrics.Read(samples)
		peak = max(peak, samples[0].Value.Uint64()-samples[1].Value.Uint64())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				read()
			}
		}
	})
	return func() {
		close(stop)
		wg.Wait()
		read()
		b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	}
}
