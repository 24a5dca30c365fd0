#!/bin/sh
# Issue 32's tuning bar: a 2-rank tuning run against a 1-rank one, the same seed and length,
# alternated seed by seed. The ranks stand for machines: each is bound to a core of its own
# (mpirun --bind-to core) and has a temporary directory of its own (so its workers' timing turns,
# tuning/worker.cpp, are its own, as on a machine of its own). Times are relative: each candidate's
# median over the built-in baseline's, timed in turn with it (a VM's speed drifts by 5% over
# seconds; the ratio holds within half a percent). For each seed: the best relative time B the
# 1-rank run measured in its search, when it first measured within 2% of B (T1) and when the 2-rank
# run first did (T2), and when the 2-rank run measured the schedule that gave B (Ts); how fast the
# 2-rank run walked the 1-rank run's path (pace: the median, over the candidates both measured, of
# when the 2-rank run measured each against when the 1-rank run did); the candidates each
# measured; each run's best as its confirmation timed it, relative to the baseline timed beside it
# (1: the built-in schedule stays best).
#   bench/distributed_tuning.sh build/tools/hjit-tune [workload W3] [minutes 1] [seeds "7 11 13"] [schedulers]
# KEEP=DIR keeps each seed's databases there (DIR/SEED-r1.sqlite, DIR/SEED-r2.sqlite).
# Needs sqlite3 (Debian's sqlite3) to read the databases.
set -eu
tune=$1
workload=${2:-W3}
minutes=${3:-1}
seeds=${4:-"7 11 13"}
schedulers=${5:+--schedulers $5}
dir=$(mktemp -d)
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to core --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca btl_vader_single_copy_mechanism none"
# The search's measurements: not the confirmation's two, which share the run's last moment.
last="(select max(at_s) from candidates)"
searched="(select * from candidates where not (at_s = $last and (select count(*) from candidates where at_s = $last) = 2))"
relative="ms / baseline_ms"
timed="$searched where valid = 1 and baseline_ms > 0"
first_within() {  # database, target relative time: the first moment the search measured within 2% of it
  sqlite3 "$1" "select coalesce(min(at_s), -1) from $timed and $relative <= $2 * 1.02"
}
path_pace() {  # the two databases: median of (2-rank's moment / 1-rank's) over the candidates both measured
  sqlite3 "$1" "attach '$2' as two;
    select b.at / a.at from (select origin, min(at_s) as at from main.candidates group by origin) a
      join (select origin, min(at_s) as at from two.candidates group by origin) b using (origin)
      where a.at > 1 order by b.at / a.at" | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else printf "%.2f\n", v[int((NR + 1) / 2)] }'
}
printf "%-5s %9s %7s %7s %6s %7s %6s %5s %6s %6s %9s %9s\n" seed B T1 T2 T2/T1 Ts Ts/T1 pace tried1 tried2 confirm1 confirm2
for seed in $seeds; do
  for ranks in 1 2; do
    rm -rf "$dir/r$ranks.sqlite"* "$dir/m0" "$dir/m1"
    mkdir "$dir/m0" "$dir/m1"
    args="--workload $workload --minutes $minutes --seed $seed --db $dir/r$ranks.sqlite --quiet --no-retrain $schedulers"
    if [ "$ranks" = 1 ]; then
      $mpirun -np 1 env TMPDIR="$dir/m0" "$tune" $args >/dev/null 2>&1
    else
      $mpirun -np 1 env TMPDIR="$dir/m0" "$tune" $args : -np 1 env TMPDIR="$dir/m1" "$tune" $args >/dev/null 2>&1
    fi
  done
  b1=$(sqlite3 "$dir/r1.sqlite" "select min($relative) from $timed")
  c1=$(sqlite3 "$dir/r1.sqlite" "select $relative from candidates where best = 1")
  c2=$(sqlite3 "$dir/r2.sqlite" "select $relative from candidates where best = 1")
  n1=$(sqlite3 "$dir/r1.sqlite" "select count(*) from $searched")
  n2=$(sqlite3 "$dir/r2.sqlite" "select count(*) from $searched")
  t1=$(first_within "$dir/r1.sqlite" "$b1")
  t2=$(first_within "$dir/r2.sqlite" "$b1")
  origin=$(sqlite3 "$dir/r1.sqlite" "select origin from $timed order by $relative limit 1" | sed "s/'/''/g")
  ts=$(sqlite3 "$dir/r2.sqlite" "select coalesce(min(at_s), -1) from candidates where origin = '$origin'")
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$dir/r1.sqlite" "$KEEP/$seed-r1.sqlite" && cp "$dir/r2.sqlite" "$KEEP/$seed-r2.sqlite"; fi
  ratio=$(awk -v a="$t1" -v b="$t2" 'BEGIN { if (b < 0) print "never"; else printf "%.2f", b / a }')
  same=$(awk -v a="$t1" -v b="$ts" 'BEGIN { if (b < 0) print "never"; else printf "%.2f", b / a }')
  printf "%-5s %9.4f %7.1f %7.1f %6s %7.1f %6s %5s %6s %6s %9.4f %9.4f\n" "$seed" "$b1" "$t1" "$t2" "$ratio" "$ts" "$same" \
    "$(path_pace "$dir/r1.sqlite" "$dir/r2.sqlite")" "$n1" "$n2" "$c1" "$c2"
done
rm -rf "$dir"
