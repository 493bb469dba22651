package install

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
)

// ValidationCacheDir is the subdirectory of mscclgo's cache directory
// ($MSCCLGO_CACHE_DIR, or ~/.cache/mscclgo) that records validated plans.
const ValidationCacheDir = "validated"

// validationFormat versions the key derivation and the record format.
const validationFormat = "mscclgo-validated-v1"

// validationLaunches is the number of launches Install runs at each size.
const validationLaunches = 2

// ExecutableVersion identifies the running mscclgo build for the
// validation cache: the SHA-256 of the executable file, so that any
// change of the code (the executor, the checks, the size choice) misses
// the cache. It returns "" when the executable cannot be read; Install
// then validates every plan. The file is read once per process.
func ExecutableVersion() string { return executableVersion() }

var executableVersion = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "exe-sha256:" + hex.EncodeToString(h.Sum(nil))
})

// validationKey is the cache key of one validation: the plan's bytes, the
// validating build, and every setting that changes what is checked (the
// element type, the sizes, the launches per size, race detection on the
// CPU backend).
func validationKey(version string, text []byte, dt executor.ElemType, sizes []uint64) string {
	plan := sha256.Sum256(text)
	h := sha256.New()
	fmt.Fprintf(h, "%s\nversion %s\nbackend cpu race=true\ndtype %s\nlaunches %d\nsizes %v\nplan %x\n",
		validationFormat, version, dt.Name(), validationLaunches, sizes, plan)
	return hex.EncodeToString(h.Sum(nil))
}

// validationRecord is the content of a cache entry: what was validated,
// for people reading the cache directory (a hit only needs the file).
type validationRecord struct {
	Format  string   `json:"format"`
	Plan    string   `json:"plan"`
	Job     string   `json:"job"`
	DType   string   `json:"dtype"`
	Sizes   []uint64 `json:"sizes"`
	Version string   `json:"version"`
}

// validationCache is a directory of records named by validationKey.
type validationCache struct {
	dir string
}

// has reports whether key was recorded.
func (c validationCache) has(key string) bool {
	if c.dir == "" || key == "" {
		return false
	}
	st, err := os.Stat(filepath.Join(c.dir, key))
	return err == nil && st.Mode().IsRegular()
}

// put records key, atomically (a temporary file renamed into place).
func (c validationCache) put(key string, rec validationRecord) error {
	if c.dir == "" || key == "" {
		return nil
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("validation cache: %w", err)
	}
	f, err := os.CreateTemp(c.dir, ".tmp-"+key[:16]+"-")
	if err != nil {
		return fmt.Errorf("validation cache: %w", err)
	}
	_, werr := f.Write(append(data, '\n'))
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(c.dir, key))
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("validation cache: %w", werr)
	}
	return nil
}
