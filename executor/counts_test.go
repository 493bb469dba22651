package executor

// counts_test.go checks the validation of alltoallv counts, the counts
// file formats and the generators.

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCountsValidate(t *testing.T) {
	t.Parallel()
	good := func() *Counts { return MatrixCounts([][]int64{{1, 2}, {3, 4}}) }
	tests := []struct {
		name  string
		edit  func(c *Counts)
		class error
		field string
	}{
		{"valid", func(c *Counts) {}, nil, ""},
		{"negative count", func(c *Counts) { c.Send[0][1] = -2; c.Recv[1][0] = -2 }, ErrCountsNegative, "send_counts[0][1]"},
		{"negative displacement", func(c *Counts) { c.RecvDispls[1][1] = -1 }, ErrCountsNegative, "recv_displs[1][1]"},
		{"totals disagree", func(c *Counts) { c.Recv[1][0] = 5 }, ErrCountsMismatch, "recv_counts[1][0]"},
		{"overlapping receive blocks", func(c *Counts) { c.RecvDispls[0][1] = 0 }, ErrCountsOverlap, "recv_displs[0][1]"},
		{"past the send buffer", func(c *Counts) { c.SendSize = []int64{3, 7}; c.SendDispls[0][1] = 2 }, ErrCountsBounds, "send_displs[0][1]"},
		{"past the receive buffer", func(c *Counts) { c.RecvSize = []int64{4, 5} }, ErrCountsBounds, "recv_displs[1][1]"},
		{"beyond 32-bit offsets", func(c *Counts) { c.SendDispls[1][0] = 1 << 31 }, ErrCountsBounds, "send_displs[1][0]"},
		{"wrong shape", func(c *Counts) { c.Send = c.Send[:1] }, ErrCountsShape, "send_counts"},
		{"send blocks may overlap", func(c *Counts) { c.SendDispls[1][1] = 0 }, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.edit(c)
			err := c.Validate(2, 4)
			if tt.class == nil {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			var ce *CountsError
			if !errors.Is(err, tt.class) || !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *CountsError of class %v", err, tt.class)
			}
			if ce.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", ce.Field, tt.field, err)
			}
		})
	}
}

func TestParseCounts(t *testing.T) {
	t.Parallel()
	want := MatrixCounts([][]int64{{0, 5}, {7, 1}})
	for _, text := range []string{"# src rows\n0 5\n7   1 # tail\n", `{"counts": [[0, 5], [7, 1]]}`} {
		got, err := ParseCounts("f", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q: -want +got\n%s", text, diff)
		}
	}
	for _, bad := range []struct{ text, msg string }{
		{"1 2\n3\n", "f:2: 1 entries, but the first row has 2"},
		{"1 x\n2 3\n", `f:1: column 2: "x" is not an integer count`},
		{"1 2\n", "f: 1 rows of 2 entries: want a square matrix counts[src][dst]"},
		{`{"counts": [[1]], "extra": 1}`, `f: json: unknown field "extra"`},
		{`{"counts": [[1]], "counts": [[2]]}`, `f: counts: the key is given twice`},
		{"9223372036854775807 1\n0 0\n", "f: counts[0]: rank 0 sends more than 2^63-1 elements in all: the counts' sum overflows"},
		{`{"counts": [[0, 0], [9223372036854775807, 1]]}`, "f: counts[1]: rank 1 sends more than 2^63-1 elements in all: the counts' sum overflows"},
		{"9223372036854775807 0\n1 0\n", "f: counts[*][0]: rank 0 receives more than 2^63-1 elements in all: the counts' sum overflows"},
	} {
		_, err := ParseCounts("f", []byte(bad.text))
		if err == nil || err.Error() != bad.msg {
			t.Errorf("%q: got %v, want %s", bad.text, err, bad.msg)
		}
	}
}

func TestCountsGenerators(t *testing.T) {
	t.Parallel()
	c, err := CountsFor("moe:experts=16,topk=2,tokens=4096,hidden=8,seed=1", 8)
	if err != nil {
		t.Fatal(err)
	}
	for r, row := range c.Send {
		var sum int64
		for _, x := range row {
			sum += x
		}
		if sum != 4096*2*8 {
			t.Errorf("rank %d sends %d elements, want tokens×topk×hidden = %d", r, sum, 4096*2*8)
		}
	}
	if err := c.Validate(8, 2); err != nil {
		t.Fatal(err)
	}
	u, err := CountsFor("uniform:count=3", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(MatrixCounts([][]int64{{3, 3}, {3, 3}}), u); diff != "" {
		t.Errorf("uniform: -want +got\n%s", diff)
	}
	a, _ := CountsFor("random:seed=9,max=100,skew=1", 4)
	b, _ := CountsFor("random:seed=9,max=100,skew=1", 4)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("random is not deterministic for one seed:\n%s", diff)
	}
	for _, bad := range []string{"moe:topk=0", "uniform:count=-1", "random:bogus=1", "moe:experts"} {
		if _, err := CountsFor(bad, 4); !errors.Is(err, ErrCountsSyntax) {
			t.Errorf("%s: got %v, want ErrCountsSyntax", bad, err)
		}
	}
}
