#!/usr/bin/env bash
# Randomized fault runs against a 3-node cluster in network namespaces, with
# the client-side history checker (tools/verify/README.md; issue 24 point 5).
#   scripts/verify.sh --runs N --minutes M       N runs, seeds drawn at random
#   scripts/verify.sh --seed S --minutes M       replay one seed's schedule
# Other flags go to tools/verify/run.py (--faults, --out DIR, --keep, --rate).
# Needs root (namespaces, nft); otherwise exits 2 with the reason. Binaries:
# ESTUARY_BIN_DIR (default build/bin); ESTUARYD (default: that dir's estuaryd).
# Exit 0: every run met the targets; 1: some did not (seeds, replay commands
# and kept run directories printed).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "verify.sh: needs root (network namespaces and nft rules)" >&2
  exit 2
fi
bin_dir=${ESTUARY_BIN_DIR:-$PWD/build/bin}
extra=()
if [[ -n ${ESTUARYD:-} ]]; then extra=(--estuaryd "$ESTUARYD"); fi
set +e
/usr/bin/python3 tools/verify/run.py --bin-dir "$bin_dir" "${extra[@]}" "$@"
status=$?
set -e
if [[ $status -eq 77 ]]; then exit 2; fi  # run.py's skip: the reason is printed
exit $status
