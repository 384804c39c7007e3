# Helpers of the MPI CLI tests (tests/tools/cli_mpi_*.sh), sourced after cli_lib.sh:
#   MPIEXEC      the launcher (required; the MPI build registers these tests with it)
# mpirun NAME N ARGS...: `mpiexec -n N $bin ARGS...`, stdout / stderr / exit code in $tmp/NAME.*
# (a 600 s limit: a hang fails the test instead of the suite's budget).
mpiexec_bin="${MPIEXEC:?set MPIEXEC to the MPI launcher}"

mpirun() {
  local name="$1" n="$2"
  shift 2
  timeout 600 "$mpiexec_bin" -n "$n" "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}

# check_log LOG TRIALS RANKS [TORN]: LOG holds TRIALS records of distinct schedules (each measured
# once, none re-measured), trials numbered 0..TRIALS-1 per workload, and every round line names
# RANKS ranks whose trials add up to the round's. At most TORN (default 0) lines do not parse: a
# record line cut short when the launcher killed rank 0 in the middle of its write, which the
# tuner's reader skips (and the writer ends with a newline before appending again).
check_log() {
  python3 - "$@" <<'PY' || fail "$1: see above"
import collections, json, sys
path, trials, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torn = int(sys.argv[4]) if len(sys.argv) > 4 else 0
lines, bad = [], 0
for l in open(path):
    try:
        lines.append(json.loads(l))
    except json.JSONDecodeError:
        bad += 1
assert bad <= torn, f"{path}: {bad} lines do not parse (at most {torn} expected)"
records = [l for l in lines if l.get("kind", "record") == "record"]
rounds = [l for l in lines if l.get("kind") == "round"]
assert len(records) == trials, f"{path}: {len(records)} records, expected {trials}"
states = collections.Counter((r["workload_key"], json.dumps(r["steps"])) for r in records)
dups = [s for s, c in states.items() if c > 1]
assert not dups, f"{path}: {len(dups)} schedules measured more than once"
assert not any(r.get("remeasured") for r in records), f"{path}: re-measured records"
by_key = collections.defaultdict(list)
for r in records: by_key[r["workload_key"]].append(r["trial"])
for key, numbers in by_key.items():
    assert sorted(numbers) == list(range(len(numbers))), f"{path}: {key}: trials {numbers}"
assert rounds, f"{path}: no round line"
for r in rounds:
    assert len(r.get("ranks", [])) == ranks, f"{path}: round {r['round']}: ranks {r.get('ranks')}"
    assert sum(t["trials"] for t in r["ranks"]) == r["trials"], f"{path}: round {r['round']}"
PY
}
