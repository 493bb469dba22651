// Smoke test of the harness: a plain failure is a named error.

package hostile

import "testing"

// TestMissingScript: a script that does not exist is exit 1 naming it.
func TestMissingScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := mscclgo(t, dir, "eval", "nope.star")
	r.wantError(t, 1, 512<<20, "nope.star")
}
