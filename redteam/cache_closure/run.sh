#!/bin/sh
# The gate's cache served a PASS for a function whose closure variable (its noise scale) changed.
set -u
cd "$(dirname "$0")"
D=$(mktemp -d)
export XDG_CONFIG_HOME="$D/cfg"
RT_SCALE=1.0 dpharness gate --module closure_mod --own --cache-dir "$D/c" --samples 2000 --time-budget 5 >/dev/null 2>&1; echo "scale 1.0: exit $?"
RT_SCALE=0.01 dpharness gate --module closure_mod --own --cache-dir "$D/c" --samples 2000 --time-budget 5; echo "scale 0.01, cached: exit $? (must be 1)"
RT_SCALE=0.01 dpharness gate --module closure_mod --own --no-cache --samples 2000 --time-budget 5 >/dev/null 2>&1; echo "scale 0.01, --no-cache: exit $?"
rm -rf "$D"
