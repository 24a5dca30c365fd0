#!/bin/sh
# Issue 32's fleet bar: two machines of a fleet share one Redis (the compile cache's shared tier,
# docs/saving-export-cache.md). The first compiles W1-W11's first calls; the second, its disk cache
# empty, must compile nothing. Both are fresh processes of hjit-bench --prepare-only, each with its
# own disk cache directory, on a redis-server of this script's own on 127.0.0.1.
#   bench/shared_cache_fleet.sh build/bench/hjit-bench [scratch dir] [workloads]
set -eu
bench=$1
scratch=${2:-$(mktemp -d)}
workloads=${3:-"W1 W2 W3 W4 W5 W6 W7 W8 W9 W10 W11"}
rm -rf "$scratch" && mkdir -p "$scratch/a" "$scratch/b" "$scratch/redis"
chmod 700 "$scratch/a" "$scratch/b"

port=$((20000 + $$ % 40000))
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$scratch/redis" --logfile "$scratch/redis/log" &
redis=$!
trap 'kill $redis 2>/dev/null; wait $redis 2>/dev/null || true' EXIT
for i in $(seq 50); do
  [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
  sleep 0.1
done
[ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] || { echo "redis-server did not start" >&2; exit 1; }

export HJIT_CACHE_REDIS="127.0.0.1:$port"
export HJIT_CACHE_KEY="the fleet key of bench/shared_cache_fleet.sh"
printf "%-4s %22s %22s\n" id "first machine" "second machine"
printf "%-4s %10s %11s %10s %11s\n" "" compiles "first ms" compiles "first ms"
failed=0
for w in $workloads; do
  a=$(HJIT_CACHE_DIR="$scratch/a" "$bench" --prepare-only "$w" O1 2>/dev/null | grep '^PREPARE')
  b=$(HJIT_CACHE_DIR="$scratch/b" "$bench" --prepare-only "$w" O1 2>/dev/null | grep '^PREPARE')
  set -- $a
  a_ms=$2 a_misses=$3
  set -- $b
  b_ms=$2 b_misses=$3
  printf "%-4s %10s %11.1f %10s %11.1f\n" "$w" "$a_misses" "$a_ms" "$b_misses" "$b_ms"
  [ "$b_misses" = 0 ] || failed=1
done
echo "entries in Redis: $(redis-cli -p "$port" --scan --pattern 'hjit:cache:*' | wc -l)"
if [ $failed = 0 ]; then echo "the second machine compiled nothing"; else echo "the second machine compiled some pipelines"; fi
exit $failed
