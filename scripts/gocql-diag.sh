#!/usr/bin/env bash
# gocql-diag.sh - builds cmd/loadgen against gocql with scripts/gocql-diag.patch applied, so a
# seed run (`SEED_GOCQL_DIAG=1 make seed`) shows why gocql answers "no streams available on
# connection" or "no hosts available" with fewer requests outstanding than it has stream ids.
#
# The patch logs to stderr, at most every 100 ms, each such error with the state of the host's
# pool (connections, free stream ids on each), how many goroutines picked a connection but hold no
# stream id on it yet, and how many wait for the session's prepared-statement cache lock; and, at
# most every second, each convoy of 1,000 or more goroutines on that lock. It changes no behaviour.
set -euo pipefail

readonly PROG=${0##*/}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO
readonly MODULE=github.com/gocql/gocql
readonly PATCHED=v1.7.0

die() { echo "$PROG: error: $*" >&2; exit 1; }

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  echo "usage: $PROG OUT   (builds ./cmd/loadgen with gocql $PATCHED + scripts/gocql-diag.patch into OUT)"
  [[ $# -eq 1 ]] && exit 0
  exit 2
fi
out=$1
[[ $out == /* ]] || out=$PWD/$out

cd "$REPO"
version=$(go list -m -f '{{.Version}}' "$MODULE")
[[ $version == "$PATCHED" ]] || die "the patch is for $MODULE $PATCHED; go.mod has $version"
go mod download "$MODULE"
src=$(go list -m -f '{{.Dir}}' "$MODULE")
[[ -d $src ]] || die "no source for $MODULE in the module cache"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gocql-diag.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/gocql"
chmod -R u+w "$tmp/gocql"
patch -s -d "$tmp/gocql" -p1 <"$REPO/scripts/gocql-diag.patch" || die "the patch does not apply"
cp go.mod "$tmp/go.mod"
cp go.sum "$tmp/go.sum"
go mod edit -modfile="$tmp/go.mod" -replace "$MODULE=$tmp/gocql"
go build -modfile="$tmp/go.mod" -o "$out" ./cmd/loadgen
