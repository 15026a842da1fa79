#!/bin/bash
# rounds.sh: compare test binaries of ./bench in rounds that run each once,
# the order rotating from round to round: on these shared machines the
# binary that ran last in a round of a fixed order came out up to 11 %
# slower than a copy of itself that ran before it (docs/BENCHMARK_HISTORY.md,
# "Sessions 24 to 27"). Prints, for each binary and benchmark, the median
# ns/op over the rounds with the minimum and maximum, and for
# BenchmarkScheduleOverKeccak the median share over-keccak / keccak.
#
# Usage: bench/rounds.sh ROUNDS PATTERN BENCHTIME BINARY...
#   ROUNDS     rounds to run
#   PATTERN    a -test.bench pattern
#   BENCHTIME  a -test.benchtime value, such as 2000000x
#   BINARY     test binaries (go test -c -o X.test ./bench)
set -euo pipefail

if [ $# -lt 4 ]; then
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
fi
rounds=$1 pattern=$2 benchtime=$3
shift 3
bins=()
for b in "$@"; do
	[ -x "$b" ] || { echo "rounds.sh: $b is not an executable test binary" >&2; exit 1; }
	[[ $b == */* ]] || b=./$b # a bare name is a file here, not a command on $PATH
	bins+=("$b")
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
n=${#bins[@]}
for ((r = 0; r < rounds; r++)); do
	for ((k = 0; k < n; k++)); do
		b=${bins[$(((k + r) % n))]}
		"$b" -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime" |
			awk -v b="$b" '/^Benchmark/ {
				q = ""
				for (i = 1; i <= NF; i++) {
					if ($i == "keccak-ns/op") k = $(i-1)
					if ($i == "over-keccak-ns/op") o = $(i-1)
				}
				if (k > 0 && o != "") q = o / k
				print b, $1, $3, q
			}' >>"$out"
	done
	echo "rounds.sh: round $((r + 1)) of $rounds done" >&2
done
# median of the values on stdin, one per line, with min and max
stats() { sort -g | awk '{a[NR] = $1} END {if (NR) printf "median %s (n=%d) min %s max %s", (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2), NR, a[1], a[NR]}'; }
for b in "${bins[@]}"; do
	for name in $(awk -v b="$b" '$1 == b {print $2}' "$out" | sort -u); do
		echo "$b $name ns/op $(awk -v b="$b" -v n="$name" '$1 == b && $2 == n {print $3}' "$out" | stats)"
		q=$(awk -v b="$b" -v n="$name" '$1 == b && $2 == n && $4 != "" {print $4}' "$out" | stats)
		[ -z "$q" ] || echo "$b $name over/keccak $q"
	done
done
