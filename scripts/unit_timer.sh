#!/usr/bin/env bash
# scripts/unit_timer.sh — a compiler launcher that times each compilation: it runs the compiler
# command it is given and appends "<seconds> <object file>" to $ATTNCERT_UNIT_TIMES.
# scripts/bootstrap.sh installs it when ATTNCERT_UNIT_TIMES is set, and prints the ten heaviest
# units at the end of the build:
#   ATTNCERT_UNIT_TIMES=units.txt bash scripts/bootstrap.sh
# (The clock starts here, so a unit waiting for a core is not counted: each line is one unit's
# own compile time.)
start=$(date +%s%N)
"$@"
status=$?
end=$(date +%s%N)
out="?"
prev=""
for arg in "$@"; do
  [ "$prev" = "-o" ] && out="$arg"
  prev="$arg"
done
printf '%d.%03d %s\n' $(( (end - start) / 1000000000 )) $(( (end - start) / 1000000 % 1000 )) "$out" \
  >> "${ATTNCERT_UNIT_TIMES:-/dev/null}"
exit $status
