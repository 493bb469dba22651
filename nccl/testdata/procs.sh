#!/bin/sh
# procs.sh N CMD [ARG...]: runs N copies of CMD as the ranks of one job
# (RANK, WORLD_SIZE, and NCCLCHECK_ID_FILE, a fresh file rank 0 writes
# the unique id into), prints rank 0's output then any other rank's
# errors, and exits with the first failing rank's status.
set -u
n=$1
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/mscclgo-procs.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
pids=""
r=0
while [ "$r" -lt "$n" ]; do
	RANK=$r WORLD_SIZE=$n NCCLCHECK_ID_FILE=$dir/id "$@" >"$dir/out.$r" 2>&1 &
	pids="$pids $!"
	r=$((r + 1))
done
status=0
r=0
for p in $pids; do
	if ! wait "$p"; then
		s=$?
		echo "procs.sh: rank $r exited with status $s:" >&2
		cat "$dir/out.$r" >&2
		[ "$status" = 0 ] && status=$s
	fi
	r=$((r + 1))
done
cat "$dir/out.0"
exit "$status"
