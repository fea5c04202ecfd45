#!/usr/bin/env bash
# Rebuilds one minor of the compatibility corpus: the sample plugins as the
# repository had them at COMMIT, the last commit of ABI minor MINOR, built
# with this machine's Go, stripped and gzipped into testdata/abi-MINOR/.
# CI never runs it; it runs the binaries it made (compat_test.go).
#
#   plugins/compat/build-corpus.sh 1.0 58e74a5
#   plugins/compat/build-corpus.sh 1.1 434e9e7 inmemory
set -euo pipefail
minor=$1 commit=$2
shift 2
plugins=${*:-inmemory sqlite}
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
full=$(git -C "$root" rev-parse "$commit^{commit}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git -C "$root" archive "$full" | tar -x -C "$work/src"
out="$here/testdata/abi-$minor"
mkdir -p "$out"
for p in $plugins; do
	(cd "$work/src" && GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags='-s -w' -buildmode=c-shared -o "$work/$p.wasm" ./plugins/$p)
	gzip -9n <"$work/$p.wasm" >"$out/$p.wasm.gz"
done
{
	echo "commit $full"
	echo "abi $minor"
	echo "plugins $plugins"
	echo "built with $(go version | cut -d' ' -f3) by plugins/compat/build-corpus.sh (-trimpath -ldflags='-s -w' -buildmode=c-shared)"
} >"$out/SOURCE"
ls -l "$out"
