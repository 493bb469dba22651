//go:build cuda

package cuda

// kernels.go holds the embedded kernel images of the interpreter and the
// choice among them: `make gpu` compiles csrc/interp.cu into sm_80 and
// sm_90 cubins and a compute_90 PTX in kernels/ (build outputs, not
// committed). The whole directory is embedded, so the package compiles
// without them; Open then reports that the images are missing.

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"gorgonia.org/cu"
)

// kernelFS holds kernels/: its README and the images `make gpu` wrote.
//
//go:embed kernels
var kernelFS embed.FS

// kernelName is the interpreter entry loaded at Open (float32, LL16);
// a session selects its own with UseKernel (gpu.KernelName).
const kernelName = "mscclgo_interp_f32_ll16"

// The kernel images of kernels/.
const (
	imageSM80 = "interp_sm80.cubin"
	imageSM90 = "interp_sm90.cubin"
	imagePTX  = "interp_compute90.ptx"
)

// ErrNoImage is returned by Open when no embedded kernel image can run on
// the device (or none was built: run `make gpu`).
var ErrNoImage = errors.New("no kernel image for this device")

// imagesFor returns the images that can run on a device of compute
// capability major.x, best first: a cubin runs on devices of its major
// version and a minor one at least its own (both cubins are x.0); the
// compute_90 PTX is compiled by the driver for any device of 9.0 or
// later.
func imagesFor(major int) []string {
	var out []string
	switch {
	case major == 8:
		out = append(out, imageSM80)
	case major == 9:
		out = append(out, imageSM90)
	}
	if major >= 9 {
		out = append(out, imagePTX)
	}
	return out
}

// loadModule loads the interpreter from the first embedded image that the
// driver accepts for a device of compute capability major.minor, into the
// current context. It returns the module and the image's name.
func loadModule(major, minor int) (cu.Module, string, error) {
	names := imagesFor(major)
	if len(names) == 0 {
		return cu.Module{}, "", fmt.Errorf("%w: compute capability %d.%d, the interpreter needs 8.0 or later",
			ErrNoImage, major, minor)
	}
	var tried []string
	for _, name := range names {
		data, err := fs.ReadFile(kernelFS, path.Join("kernels", name))
		if errors.Is(err, fs.ErrNotExist) {
			tried = append(tried, name+": not built")
			continue
		}
		if err != nil {
			return cu.Module{}, "", fmt.Errorf("reading the embedded %s: %w", name, err)
		}
		if len(data) == 0 {
			tried = append(tried, name+": empty")
			continue
		}
		// cu.LoadData copies the image into C memory with a terminating
		// NUL, which the PTX image needs; a cubin is read by its ELF sizes.
		mod, err := cu.LoadData(string(data))
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: cuModuleLoadData: %v", name, err))
			continue
		}
		return mod, name, nil
	}
	return cu.Module{}, "", fmt.Errorf("%w: compute capability %d.%d (%s); `make gpu` builds the images",
		ErrNoImage, major, minor, strings.Join(tried, "; "))
}
