package trace

// validate.go holds Validate, a checker of Trace Event files: the fields
// each phase needs, their types, the nesting of complete events on a
// thread, and flows whose ids pair one start with one finish, each bound
// to a slice.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Stats counts what a valid trace holds.
type Stats struct {
	// Processes and Threads are the named ones (process_name and
	// thread_name metadata).
	Processes, Threads int
	// Slices are the complete events, Flows the start/finish pairs.
	Slices, Flows int
}

// The phases Validate accepts (the Trace Event format's list).
var phases = map[string]bool{
	"B": true, "E": true, "X": true, "i": true, "I": true, "C": true,
	"b": true, "n": true, "e": true, "s": true, "t": true, "f": true,
	"P": true, "N": true, "O": true, "D": true, "M": true, "R": true,
	"c": true, "(": true, ")": true,
}

// slice is a complete event's extent on its thread.
type slice struct {
	ts, end float64
	index   int
}

// Validate checks data, a trace in the JSON object form ({"traceEvents":
// [...]}) or the array form, and returns what it holds. Every problem
// names the event's index and field; all are reported, joined.
func Validate(data []byte) (Stats, error) {
	var st Stats
	var raw []map[string]json.RawMessage
	t := bytes.TrimSpace(data)
	if len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &raw); err != nil {
			return st, fmt.Errorf("trace: %w", err)
		}
	} else {
		var obj struct {
			TraceEvents *[]map[string]json.RawMessage `json:"traceEvents"`
		}
		if err := json.Unmarshal(t, &obj); err != nil {
			return st, fmt.Errorf("trace: %w", err)
		}
		if obj.TraceEvents == nil {
			return st, errors.New("trace: no traceEvents array")
		}
		raw = *obj.TraceEvents
	}
	var errs []string
	bad := func(i int, format string, args ...any) {
		if len(errs) < 50 {
			errs = append(errs, fmt.Sprintf("traceEvents[%d]: ", i)+fmt.Sprintf(format, args...))
		}
	}
	type thread struct{ pid, tid int64 }
	type flowEnd struct {
		index int
		ts    float64
		th    thread
	}
	slices := map[thread][]slice{}
	starts, finishes := map[string][]flowEnd{}, map[string][]flowEnd{}
	for i, e := range raw {
		ph, ok := str(e, "ph")
		if !ok {
			bad(i, "ph: missing or not a string")
			continue
		}
		if !phases[ph] {
			bad(i, "ph %q: not a Trace Event phase", ph)
			continue
		}
		name, ok := str(e, "name")
		if !ok && ph != "E" {
			bad(i, "name: missing or not a string")
		}
		pid, okp := integer(e, "pid")
		tid, okt := integer(e, "tid")
		if !okp {
			bad(i, "pid: missing or not an integer")
		}
		if !okt {
			bad(i, "tid: missing or not an integer")
		}
		th := thread{pid, tid}
		ts, okts := number(e, "ts")
		if ph != "M" && !okts {
			bad(i, "ts: missing or not a number")
		}
		if okts && ts < 0 {
			bad(i, "ts %g: negative", ts)
		}
		switch ph {
		case "M":
			var args map[string]json.RawMessage
			if a, ok := e["args"]; !ok || json.Unmarshal(a, &args) != nil {
				bad(i, "args: a metadata event needs an args object")
				break
			}
			switch name {
			case "process_name", "thread_name":
				if _, ok := str(args, "name"); !ok {
					bad(i, "args.name: %s needs a string name", name)
				}
				if name == "process_name" {
					st.Processes++
				} else {
					st.Threads++
				}
			case "process_sort_index", "thread_sort_index":
				if _, ok := integer(args, "sort_index"); !ok {
					bad(i, "args.sort_index: %s needs an integer", name)
				}
			}
		case "X":
			dur, ok := number(e, "dur")
			if !ok || dur < 0 {
				bad(i, "dur: a complete event needs a non-negative number")
				break
			}
			st.Slices++
			slices[th] = append(slices[th], slice{ts, ts + dur, i})
		case "s", "t", "f":
			id, ok := flowID(e)
			if !ok {
				bad(i, "id: a flow event needs a number or string id")
				break
			}
			if _, ok := str(e, "cat"); !ok {
				bad(i, "cat: a flow event needs a category")
			}
			if bp, ok := e["bp"]; ok && string(bp) != `"e"` {
				bad(i, "bp %s: want \"e\" or none", bp)
			}
			key := name + "\x00" + id
			fe := flowEnd{i, ts, th}
			if ph == "s" {
				starts[key] = append(starts[key], fe)
			} else if ph == "f" {
				finishes[key] = append(finishes[key], fe)
			}
		}
	}
	// Complete events on one thread nest: none ends inside another that
	// started before it.
	for th, ss := range slices {
		sort.SliceStable(ss, func(a, b int) bool {
			if ss[a].ts != ss[b].ts {
				return ss[a].ts < ss[b].ts
			}
			return ss[a].end > ss[b].end
		})
		var open []slice
		for _, s := range ss {
			for len(open) > 0 && open[len(open)-1].end <= s.ts {
				open = open[:len(open)-1]
			}
			if n := len(open); n > 0 && s.end > open[n-1].end {
				bad(s.index, "complete event [%g, %g] on pid %d tid %d overlaps traceEvents[%d] [%g, %g] without nesting",
					s.ts, s.end, th.pid, th.tid, open[n-1].index, open[n-1].ts, open[n-1].end)
			}
			open = append(open, s)
		}
	}
	enclosed := func(fe flowEnd) bool {
		for _, s := range slices[fe.th] {
			if s.ts <= fe.ts && fe.ts <= s.end {
				return true
			}
		}
		return false
	}
	keys := make([]string, 0, len(starts)+len(finishes))
	for k := range starts {
		keys = append(keys, k)
	}
	for k := range finishes {
		if _, ok := starts[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, f := starts[k], finishes[k]
		label := strings.Replace(k, "\x00", " id ", 1)
		first := 0
		if len(s) > 0 {
			first = s[0].index
		} else if len(f) > 0 {
			first = f[0].index
		}
		if len(s) != 1 || len(f) != 1 {
			bad(first, "flow %s: %d starts and %d finishes, want one of each", label, len(s), len(f))
			continue
		}
		if f[0].ts < s[0].ts {
			bad(f[0].index, "flow %s finishes at %g, before its start at %g", label, f[0].ts, s[0].ts)
		}
		for _, fe := range []flowEnd{s[0], f[0]} {
			if !enclosed(fe) {
				bad(fe.index, "flow %s at %g on pid %d tid %d: no complete event encloses it", label, fe.ts, fe.th.pid, fe.th.tid)
			}
		}
		st.Flows++
	}
	if len(errs) > 0 {
		return st, fmt.Errorf("trace: %d problems:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	return st, nil
}

func str(e map[string]json.RawMessage, k string) (string, bool) {
	var s string
	v, ok := e[k]
	return s, ok && json.Unmarshal(v, &s) == nil
}

func number(e map[string]json.RawMessage, k string) (float64, bool) {
	var f float64
	v, ok := e[k]
	return f, ok && json.Unmarshal(v, &f) == nil && !math.IsInf(f, 0)
}

func integer(e map[string]json.RawMessage, k string) (int64, bool) {
	var n int64
	v, ok := e[k]
	return n, ok && json.Unmarshal(v, &n) == nil
}

// flowID returns a flow event's id (or id2.global/local) as text.
func flowID(e map[string]json.RawMessage) (string, bool) {
	v, ok := e["id"]
	if !ok {
		return "", false
	}
	var f float64
	if json.Unmarshal(v, &f) == nil {
		return string(v), true
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	return "", false
}
