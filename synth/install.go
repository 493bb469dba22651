// This file puts synthesized programs into a plan set: mscclgo install
// --topo evaluates them beside the bundled algorithms.

package synth

import (
	"bytes"
	"context"
	"io/fs"
	"path"
	"time"

	"github.com/mscclgo/mscclgo/algorithms"
)

// InstallSet synthesizes every collective with o (its Collective set in
// turn) and returns what planset/install needs to add them to the default
// set: the algorithms' files (the bundled ones and the synthesized
// NAME.star beside them) and one job per synthesized file, after the
// bundled jobs.
func InstallSet(ctx context.Context, o Options) (fs.FS, []algorithms.Job, []*Result, error) {
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		return nil, nil, nil, err
	}
	files := map[string][]byte{}
	var results []*Result
	for _, c := range []Collective{AllGather, ReduceScatter, AllReduce} {
		o.Collective = c
		res, err := Synthesize(ctx, o)
		if err != nil {
			return nil, nil, nil, err
		}
		files[res.Name+".star"] = res.Star
		jobs = append(jobs, algorithms.Job{Algorithm: res.Name, Params: map[string]string{}})
		results = append(results, res)
	}
	return overlay{base: algorithms.FS, files: files}, jobs, results, nil
}

// overlay is base with files added at its root.
type overlay struct {
	base  fs.FS
	files map[string][]byte
}

func (o overlay) ReadFile(name string) ([]byte, error) {
	if data, ok := o.files[path.Clean(name)]; ok {
		return append([]byte(nil), data...), nil
	}
	return fs.ReadFile(o.base, name)
}

func (o overlay) Open(name string) (fs.File, error) {
	if data, ok := o.files[path.Clean(name)]; ok {
		return &memFile{name: path.Base(name), r: bytes.NewReader(data), size: int64(len(data))}, nil
	}
	return o.base.Open(name)
}

// memFile is an open file of an overlay.
type memFile struct {
	name string
	r    *bytes.Reader
	size int64
}

func (f *memFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f.name, f.size}, nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
