#!/bin/bash
# pairs.sh: compare two test binaries of ./bench by running them at the same
# time, one on each of two cores, the cores swapped from pair to pair: each
# pair then meets the same machine (its neighbours, its memory's state),
# which rounds run one after the other do not (docs/BENCHMARK_HISTORY.md,
# session 33: the medians of two sets of rotated rounds moved by 17 % for
# code that had not changed). The two runs load each other's memory, so
# this measures the builds under that load, and says which is faster,
# not by how much alone. Run the same binary against a copy of itself to
# see the method's own spread.
#
# Usage: bench/pairs.sh PAIRS PATTERN BENCHTIME A B
#   PAIRS      pairs to run
#   PATTERN    a -test.bench pattern naming one benchmark
#   BENCHTIME  a -test.benchtime value, such as 20000000x
#   A, B       test binaries (go test -c -o X.test ./bench)
#
# Prints each pair's ns/op (A B), then in how many pairs B was faster and
# the geometric mean of B / A. Needs taskset (util-linux) and two cores.
set -euo pipefail

if [ $# -ne 5 ]; then
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
fi
pairs=$1 pattern=$2 benchtime=$3 a=$4 b=$5
for x in "$a" "$b"; do
	[ -x "$x" ] || { echo "pairs.sh: $x is not an executable test binary" >&2; exit 1; }
done
# A bare name is a file here, not a command on $PATH.
[[ $a == */* ]] || a=./$a
[[ $b == */* ]] || b=./$b
command -v taskset >/dev/null || { echo "pairs.sh: taskset not found (apt-get install util-linux)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "pairs.sh: needs two cores, this machine has $(nproc)" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# nsop prints the ns/op of the one benchmark in file $1.
nsop() {
	local n
	n=$(grep -c '^Benchmark' "$1" || true)
	if [ "$n" != 1 ]; then
		echo "pairs.sh: pattern $pattern names $n benchmarks, not one" >&2
		exit 1
	fi
	awk '/^Benchmark/ { print $3 }' "$1"
}
for ((r = 0; r < pairs; r++)); do
	ca=$((r % 2)) cb=$(((r + 1) % 2))
	taskset -c "$ca" "$a" -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime" >"$dir/a" &
	pa=$!
	taskset -c "$cb" "$b" -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime" >"$dir/b" &
	pb=$!
	wait "$pa" || { echo "pairs.sh: $a failed" >&2; exit 1; }
	wait "$pb" || { echo "pairs.sh: $b failed" >&2; exit 1; }
	x=$(nsop "$dir/a")
	y=$(nsop "$dir/b")
	echo "$x $y" | tee -a "$dir/pairs"
done
awk -v a="$a" -v b="$b" '
	{ if ($2 < $1) w++; s += log($2 / $1) }
	END { printf "%s faster than %s in %d of %d pairs; geometric mean %s / %s: %.3f\n", b, a, w, NR, b, a, exp(s / NR) }' "$dir/pairs"
