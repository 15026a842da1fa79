#!/bin/bash
# instructions.sh: the instructions one op of a benchmark executes, outside
# the Go runtime, counted by valgrind's cachegrind: a figure that does not
# move with the load of a shared machine, where the time of one op moves by
# 10-30 % from run to run. Use it to compare two builds of a change to
# code whose time follows the instructions it runs, such as work on data
# in cache; it says nothing of cache misses.
#
# Usage: bench/instructions.sh TESTBINARY PATTERN [N]
#   TESTBINARY  a test binary of ./bench (go test -c -o X.test ./bench)
#   PATTERN     a -test.bench pattern that names one benchmark
#   N           the shorter run's op count (default 1000000); the longer
#               runs 3N, and the difference of the two, per function,
#               divided by 2N, is the figure: setup cancels out.
#
# It prints instructions per op outside the runtime, the runtime's share
# (the garbage collector's work varies between runs) and the functions
# that execute the most: the first five, or $TOP of them. Needs valgrind
# (apt-get install valgrind). GODEBUG=cpu.rdtscp=off: valgrind 3.19 does
# not decode the RDTSCP the runtime uses for its clock.
set -euo pipefail

if [ $# -lt 2 ]; then
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
fi
bin=$1
pattern=$2
n=${3:-1000000}
for tool in valgrind cg_diff cg_annotate; do
	command -v "$tool" >/dev/null || { echo "instructions.sh: $tool not found (apt-get install valgrind)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "instructions.sh: $bin is not an executable test binary" >&2; exit 1; }
[[ $bin == */* ]] || bin=./$bin # a bare name is a file here, not a command on $PATH

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { # run N OUT
	GODEBUG=cpu.rdtscp=off valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file="$2" "$bin" -test.run '^$' -test.bench "$pattern" \
		-test.benchtime "$1x" >"$2.log" 2>&1 || { echo "instructions.sh: the run of $1 ops failed:" >&2; tail -5 "$2.log" >&2; exit 1; }
}
run "$n" "$dir/short" &
short=$!
run $((3 * n)) "$dir/long"
wait "$short"
grep -q '^Benchmark' "$dir/long.log" || { echo "instructions.sh: pattern $pattern names no benchmark" >&2; exit 1; }

cg_diff "$dir/short" "$dir/long" >"$dir/diff" 2>/dev/null
# One line per function: Ir of the difference, then file:function.
cg_annotate --auto=no --threshold=0 "$dir/diff" 2>/dev/null |
	awk '/file:function/ { on = 1; next }
		on && NF >= 2 { v = $1; gsub(",", "", v); if (v ~ /^-?[0-9]+$/) print v, $NF }' >"$dir/funcs"
awk -v ops=$((2 * n)) '
	{ if ($2 ~ /src\/runtime\/|internal\/runtime|:runtime\./) rt += $1; else own += $1 }
	END { printf "%.1f instructions per op outside the runtime (runtime: %.1f)\n", own / ops, rt / ops }' "$dir/funcs"
# awk, not head, takes the first lines: it reads them all, so sort ends
# without a SIGPIPE, which pipefail made the script's status (141).
sort -rn "$dir/funcs" | awk -v top="${TOP:-5}" -v ops=$((2 * n)) 'NR <= top { printf "  %7.1f  %s\n", $1 / ops, $2 }'
