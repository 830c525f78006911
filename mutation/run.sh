#!/usr/bin/env bash
# Opt-in mutation testing of dpharness's verdict logic with mutmut 3 (never part of the default CI run).
#
#   bash mutation/run.sh TARGET [TARGET ...]     TARGET: stats | proofs | audit | gate   (or: all)
#
# Each target's configuration is mutation/TARGET.cfg (a setup.cfg [mutmut] section: which file's
# functions to mutate, and which fast tests each mutant must fail). mutmut 3 runs pytest on a copy of
# the project in ./mutants and imports the package from mutants/src, mutants/. or mutants/source, so
# this script stages the repository in the src/dpharness layout that pyproject.toml's package-dir
# maps to (harness/ -> dpharness, mechanisms/ -> dpharness.mechanisms, ...) in a scratch directory
# (MUTATION_WORKDIR, default /tmp/dpharness-mutation/TARGET), runs mutmut there, and writes the
# per-mutant results to mutation/results/TARGET.txt and the score to mutation/results/TARGET.score.
#
# Requires: pip install mutmut (3.x). Uses MUTATION_JOBS processes (default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
jobs="${MUTATION_JOBS:-2}"
python="${PYTHON:-python}"

if [ "$#" -eq 0 ]; then
    echo "usage: bash mutation/run.sh TARGET [TARGET ...]; targets: $(cd "$here" && ls ./*.cfg | sed 's#./##; s#\.cfg##' | tr '\n' ' ')or all" >&2
    exit 2
fi
targets=("$@")
if [ "${targets[0]}" = all ]; then
    targets=()
    for cfg in "$here"/*.cfg; do targets+=("$(basename "$cfg" .cfg)"); done
fi
"$python" -c "import mutmut" 2>/dev/null || { echo "mutmut is not installed: pip install mutmut" >&2; exit 2; }
mkdir -p "$here/results"

for target in "${targets[@]}"; do
    cfg="$here/$target.cfg"
    [ -f "$cfg" ] || { echo "no configuration $cfg; targets: $(ls "$here"/*.cfg | xargs -n1 basename | sed 's/\.cfg$//' | tr '\n' ' ')" >&2; exit 2; }
    work="${MUTATION_WORKDIR:-/tmp/dpharness-mutation}/$target"
    rm -rf "$work"
    mkdir -p "$work/src"
    cp -r "$repo/harness" "$work/src/dpharness"
    for sub in mechanisms proofs auditors; do cp -r "$repo/$sub" "$work/src/dpharness/$sub"; done
    cp -r "$repo/tests" "$work/tests"
    find "$work" -name __pycache__ -type d -prune -exec rm -rf {} +
    # the pytest settings (markers, --strict-markers) without any [tool.mutmut] section, so that
    # mutmut reads this target's setup.cfg
    "$python" - "$repo/pyproject.toml" "$work/pyproject.toml" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
text = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", text)
open(sys.argv[2], "w", encoding="utf-8").write(text)
PY
    cp "$cfg" "$work/setup.cfg"
    echo "== mutation target $target (work directory $work)"
    start=$(date +%s)
    # the package under test must come from mutants/src (mutmut puts it first on sys.path); the
    # editable install's finder only answers when sys.path has no dpharness, so nothing else needed
    # a target whose tests start process pools (the auditor's certification workers) is run pinned to
    # one core: the auditor then uses one worker, and no grandchild process reaches mutmut's reaper
    # (mutmut 3 fails with KeyError on a pid it did not start). Declared in the .cfg as
    # "# run.sh-prefix: taskset -c 0".
    prefix="$(sed -n 's/^# run.sh-prefix: //p' "$cfg")"
    (cd "$work" && $prefix "$python" -m mutmut run --max-children "$jobs") > "$here/results/$target.log" 2>&1 || {
        echo "mutmut run failed for $target; see mutation/results/$target.log" >&2; tail -20 "$here/results/$target.log" >&2; exit 1; }
    (cd "$work" && "$python" -m mutmut results --all true) > "$here/results/$target.txt" 2>&1 || true
    "$python" - "$here/results/$target.txt" "$target" "$(( $(date +%s) - start ))" > "$here/results/$target.score" <<'PY'
import collections, sys
counts = collections.Counter()
for line in open(sys.argv[1], encoding="utf-8"):
    if ":" in line and "__mutmut_" in line:
        counts[line.rsplit(":", 1)[1].strip()] += 1
total = sum(counts.values())
killed = counts.get("killed", 0) + counts.get("timeout", 0) + counts.get("caught by type check", 0)
print(f"{sys.argv[2]}: killed {killed} / {total} mutants ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); "
      f"{sys.argv[3]} s wall clock")
PY
    cat "$here/results/$target.score"
done
