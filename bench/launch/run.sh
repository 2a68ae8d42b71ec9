#!/usr/bin/env bash
# Launch to all-ranks-ready: gorun -np N of a program that calls spmd.Init and
# Barrier, against mpirun -np N of the same MPI program, measured in one run
# with hyperfine. Prints both means and the ratio gorun/mpirun.
#
#   bench/launch/run.sh [NP] [RUNS]      (make bench-launch)
set -euo pipefail
np=${1:-8}
runs=${2:-20}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

need() { command -v "$1" >/dev/null || { echo "bench-launch: $1 not found; install $2 (apt-get install -y $2)" >&2; exit 1; }; }
need mpicc libopenmpi-dev
need mpirun openmpi-bin
need hyperfine hyperfine

go build -o "$out/gorun" "$root/cmd/gorun"
go build -o "$out/initbarrier" "$root/bench/launch/initbarrier"
mpicc -O2 -o "$out/init_barrier" "$root/bench/launch/init_barrier.c"

mpirun_cmd="mpirun --allow-run-as-root --oversubscribe -np $np $out/init_barrier"
gorun_cmd="$out/gorun -np $np $out/initbarrier"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$out/h.json" \
	-n "gorun -np $np" "$gorun_cmd" -n "mpirun -np $np" "$mpirun_cmd" >&2

python3 - "$out/h.json" "$np" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
np = sys.argv[2]
g, m = r[f"gorun -np {np}"], r[f"mpirun -np {np}"]
print(f"launch to all-ranks-ready, np {np}, {len(g['times'])} runs each")
print(f"{'':8} {'mean_s':>8} {'median_s':>9} {'stddev_s':>9}")
for name, x in (("gorun", g), ("mpirun", m)):
    print(f"{name:8} {x['mean']:8.3f} {x['median']:9.3f} {x['stddev']:9.3f}")
print(f"ratio gorun/mpirun (median): {g['median']/m['median']:.2f}  (target <= 0.50)")
PY
