package executor

import (
	"context"
	"fmt"
)

// CheckSizes returns up to n message sizes (the smallest, a middle one and
// the largest) that are valid for plan: within its range and divisible as
// its chunking needs. Sizes stay below maxBytes, or below four times the
// smallest valid size when the plan's range starts above maxBytes.
func CheckSizes(plan *Plan, dt ElemType, maxBytes uint64, n int) []uint64 {
	var valid []uint64
	unit := sizeUnit(plan, dt)
	limit := maxBytes
	for s := unit; s != 0 && s < 1<<40; s *= 2 {
		if len(valid) > 0 && s > limit {
			break
		}
		if s < plan.MinMessageSize || s > plan.MaxMessageSize {
			continue
		}
		l, err := PlanLayout(plan, s, dt, plan.Inplace)
		if err != nil {
			continue
		}
		if _, err := Instantiate(plan, l.Sizes); err != nil {
			continue
		}
		if len(valid) == 0 && 4*s > limit {
			limit = 4 * s
		}
		valid = append(valid, s)
	}
	if len(valid) <= n {
		return valid
	}
	out := []uint64{valid[0], valid[len(valid)/2], valid[len(valid)-1]}
	return out[:n]
}

// sizeUnit is the smallest message size worth trying: the alignment times
// the chunk counts and the rank count, so that every buffer divides.
func sizeUnit(plan *Plan, dt ElemType) uint64 {
	a := plan.BufferAlignment
	if a == 0 {
		a = 16
	}
	u := lcm(a, uint64(dt.Size()))
	for _, g := range plan.GPUs {
		for _, c := range []int{g.InputChunks, g.OutputChunks} {
			if c > 0 {
				u = lcm(u, a*uint64(c))
			}
		}
	}
	return lcm(u, a*uint64(len(plan.GPUs)))
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b uint64) uint64 { return a / gcd(a, b) * b }

// RunChecked runs plan at one message size for iters launches on backend,
// with race detection, checking the results of every launch (plans
// without a defined result only run).
func RunChecked(ctx context.Context, backend Backend, plan *Plan, size uint64, dt ElemType, inPlace bool, iters int) error {
	l, err := PlanLayout(plan, size, dt, inPlace)
	if err != nil {
		return err
	}
	inst, err := Instantiate(plan, l.Sizes)
	if err != nil {
		return err
	}
	sess, err := backend.Open(inst, Options{DType: dt, Race: true})
	if err != nil {
		return err
	}
	defer sess.Close()
	bufs := l.Alloc()
	for it := 0; it < iters; it++ {
		l.FillInputs(bufs, it)
		if err := sess.Launch(ctx, bufs); err != nil {
			return err
		}
		if !l.Checked() {
			continue
		}
		wrong, err := l.Check(bufs, it)
		if err != nil {
			return err
		}
		for r, w := range wrong {
			if w > 0 {
				return fmt.Errorf("launch %d: rank %d has %d wrong elements", it, r, w)
			}
		}
	}
	return nil
}
