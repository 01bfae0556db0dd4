# PostgreSQL on the mount, every process preloaded (sourced by
# programs.sh): initdb, pgbench -i, pgbench -c 4 killed by a kill -9 of
# the postmaster in the middle of its run, a restart (WAL recovery), then
# pgbench's invariant — the balances of accounts, tellers and branches
# each sum to the deltas in history, since every transaction changes all
# four or none — and pg_amcheck over every table and index.
pgdata=$mnt/pg/data
sockets=$work/pgsock
port=5544
pglog=$sockets/pg.log
mkdir -p "$mnt/pg" "$sockets"
chown postgres: "$mnt/pg" "$sockets"
as_pg() { runuser -u postgres -- env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$mnt" "$@"; }
pg_start() {
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$pglog" -w -t 120 \
        -o "-p $port -k $sockets -c listen_addresses=''" start >/dev/null
    head -n 1 "$pgdata/postmaster.pid" > "$pg_pid_file"
}
psql_q() { as_pg "$pgbin/psql" -h "$sockets" -p "$port" -d postgres -Atqc "$1"; }

as_pg "$pgbin/initdb" -D "$pgdata" -A trust --no-instructions >/dev/null
pg_start
as_pg "$pgbin/pgbench" -h "$sockets" -p "$port" -i -s 2 -q postgres 2>&1 | tail -n 1
as_pg "$pgbin/pgbench" -h "$sockets" -p "$port" -c 4 -j 2 -T 30 postgres > "$work/pgbench.out" 2>&1 &
bench=$!
sleep 4
committed=$(psql_q "select count(*) from pgbench_history")
postmaster=$(cat "$pg_pid_file")
children=$(pgrep -P "$postmaster" | tr '\n' ' ')
kill -9 "$postmaster"
wait "$bench" || true
[ "$committed" -gt 0 ] || { echo "postgres: no transaction committed before the kill"; exit 1; }
# The backends notice their postmaster's death and exit; a new one may
# not start while they still hold the old shared memory.
for _ in $(seq 1 100); do
    alive=0
    for c in $children; do kill -0 "$c" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
done
pg_start
grep -q "database system was interrupted" "$pglog" || { echo "postgres: no recovery"; exit 1; }
after=$(psql_q "select count(*) from pgbench_history")
[ "$after" -ge "$committed" ] || { echo "postgres: $committed transactions before the kill, $after after"; exit 1; }
sums=$(psql_q "select (select sum(abalance) from pgbench_accounts), (select sum(tbalance) from pgbench_tellers), (select sum(bbalance) from pgbench_branches), (select coalesce(sum(delta), 0) from pgbench_history)")
IFS='|' read -r a t b h <<<"$sums"
[ "$a" = "$h" ] && [ "$t" = "$h" ] && [ "$b" = "$h" ] || { echo "postgres: balances $sums do not agree"; exit 1; }
psql_q "create extension if not exists amcheck" >/dev/null
as_pg "$pgbin/pg_amcheck" -h "$sockets" -p "$port" --heapallindexed postgres
echo "pgbench: $committed transactions seen before the kill, $after after recovery; balances agree ($h); pg_amcheck clean"
as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null
rm -f "$pg_pid_file"
