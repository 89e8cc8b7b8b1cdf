#!/usr/bin/env bash
# `make lint`: no module of the package, its benchmarks or scripts over 400 lines (STYLE.md: split a
# module by what it holds). Tests are exempt: a test file grows with the cases it covers.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-400}
big=$(git ls-files '*.py' | grep -v '^tests/' | xargs wc -l | awk -v n="$limit" '$2 != "total" && $1 > n {print "  " $2 " (" $1 " lines)"}')
if [ -n "$big" ]; then
  echo "modules over $limit lines (split them by what they hold):"
  echo "$big"
  exit 1
fi
