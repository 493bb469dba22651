package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/internal/infile"
	"github.com/mscclgo/mscclgo/plan"
)

// TestAtSize: the size is named once, by the message when its error says
// it names that size (plan.PlanError.Sizes), else by atSize.
func TestAtSize(t *testing.T) {
	t.Parallel()
	named := &plan.PlanError{Err: plan.ErrSize, Sizes: []uint64{1024}, Msg: "message size 1024 (the input size): below min_message_size 2048"}
	for _, tc := range []struct {
		name string
		size uint64
		err  error
		want string
	}{
		{"named", 1024, named, "p.json: message size 1024 (the input size): below min_message_size 2048"},
		{"named and wrapped", 1024, fmt.Errorf("%w (algo.star:3)", named), "p.json: message size 1024 (the input size): below min_message_size 2048 (algo.star:3)"},
		{"another size named", 4096, named, "p.json: size 4096: message size 1024 (the input size): below min_message_size 2048"},
		{"the number only in the text", 1024, errors.New("size 1024 somewhere"), "p.json: size 1024: size 1024 somewhere"},
		{"a path", 4096, &plan.PlanError{Path: "gpus[0]", Err: plan.ErrSize, Msg: "re: 1 bytes"}, "p.json: size 4096: gpus[0]: re: 1 bytes"},
	} {
		if got := atSize("p.json", tc.size, tc.err).Error(); got != tc.want {
			t.Errorf("%s: got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestIsDeadlock: a deadlock is told by its type, wrapped or not, never
// by its words.
func TestIsDeadlock(t *testing.T) {
	t.Parallel()
	dl := &executor.DeadlockError{}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{dl, true},
		{fmt.Errorf("size 4: %w", dl), true},
		{errors.New("deadlock: 2 thread block(s) blocked"), false},
		{errors.New("out of range"), false},
	} {
		if got := isDeadlock(tc.err); got != tc.want {
			t.Errorf("isDeadlock(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestNamePlan: the plan's name is added once, by type: not to an error
// marked as naming the file (aboutFile, infile.Error of that path), nor
// to a usage error; to anything else, whatever its words.
func TestNamePlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"about the file", aboutFile("p.json", errors.New("p.json is empty")), "p.json is empty"},
		{"about another file", aboutFile("q.json", errors.New("q.json is empty")), "p.json: q.json is empty"},
		{"infile", &infile.Error{Path: "p.json", What: "a plan", Err: infile.ErrLinkLoop}, "p.json: a loop of symbolic links (want a plan)"},
		{"words only", errors.New("p.json: looks named"), "p.json: p.json: looks named"},
		{"usage", usageErr("--size: bad"), "--size: bad"},
	} {
		if got := namePlan("p.json", tc.err).Error(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if aboutFile("p.json", nil) != nil {
		t.Error("aboutFile(nil) is not nil")
	}
}
