#!/usr/bin/env bash
# Runs the markov-vs-eino comparison: builds the benchmark binary once,
# then runs every benchmark COUNT times (default 5), one pass after
# another, so each pass interleaves the two libraries under the same load.
# Raw results go to OUT (default out.txt); benchstat sets them side by
# side when it is installed (go install golang.org/x/perf/cmd/benchstat@latest).
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-5}
out=${OUT:-out.txt}
bin=$(mktemp -d)/peers.test
go test -c -o "$bin" .
for _ in $(seq "$count"); do
	"$bin" -test.run '^$' -test.bench . -test.benchmem
done | tee "$out"
rm -r "$(dirname "$bin")"
if command -v benchstat >/dev/null; then
	benchstat -col /lib "$out"
fi
