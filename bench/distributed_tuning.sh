#!/bin/sh
# Issue 32's tuning bar: a 2-rank tuning run against a 1-rank one, each rank on one core of its
# own (mpirun --bind-to core: the ranks stand for machines), the same seed and length, alternated
# seed by seed. For each seed: the 1-rank run's best B (as its confirmation timed it) and when a
# measurement first came within 2% of it (T1), when one of the 2-rank run first did (T2), each
# run's own confirmed best, and the candidates each measured.
#   bench/distributed_tuning.sh build/tools/hjit-tune [workload W3] [minutes 1] [seeds "7 11 13"]
# Needs sqlite3 (Debian's sqlite3) to read the databases.
set -eu
tune=$1
workload=${2:-W3}
minutes=${3:-1}
seeds=${4:-"7 11 13"}
dir=$(mktemp -d)
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to core --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca btl_vader_single_copy_mechanism none"
first_within() {  # database, target ms: the first moment a valid measurement came within 2% of it
  sqlite3 "$1" "select coalesce(min(at_s), -1) from candidates where valid = 1 and ms <= $2 * 1.02"
}
printf "%-5s %10s %8s %8s %10s %8s %8s %8s\n" seed "1-rank B" T1 tried "2-rank B" T2 tried T2/T1
for seed in $seeds; do
  for ranks in 1 2; do
    rm -f "$dir/r$ranks.sqlite"*
    $mpirun -np $ranks "$tune" --workload "$workload" --minutes "$minutes" --seed "$seed" --db "$dir/r$ranks.sqlite" --quiet \
      --no-retrain >/dev/null 2>&1
  done
  b1=$(sqlite3 "$dir/r1.sqlite" "select ms from candidates where best = 1")
  b2=$(sqlite3 "$dir/r2.sqlite" "select ms from candidates where best = 1")
  n1=$(sqlite3 "$dir/r1.sqlite" "select count(*) from candidates")
  n2=$(sqlite3 "$dir/r2.sqlite" "select count(*) from candidates")
  t1=$(first_within "$dir/r1.sqlite" "$b1")
  t2=$(first_within "$dir/r2.sqlite" "$b1")
  ratio=$(awk -v a="$t1" -v b="$t2" 'BEGIN { if (b < 0) print "never"; else printf "%.2f", b / a }')
  printf "%-5s %10.4f %8.1f %8s %10.4f %8.1f %8s %8s\n" "$seed" "$b1" "$t1" "$n1" "$b2" "$t2" "$n2" "$ratio"
done
rm -rf "$dir"
