/*
 * SQLite in WAL mode and LMDB, the two embedded databases that map the
 * files they write (SQLite its -shm index, MAP_SHARED read-write; LMDB
 * its data file read-only while it writes with pwrite, and its lock
 * file read-write with process-shared mutexes in it). Run under the
 * interposer (tests/preload/run.sh, bench/mapped.sh) or on any file
 * system:
 *
 *   dbs sqlite-run DB N [report]   N transactions (synchronous=FULL), a
 *                                  checkpoint, integrity_check
 *   dbs sqlite-check DB K          integrity_check; rows 1..K all there
 *   dbs lmdb-run DIR N [report]    N puts, 100 per transaction, each
 *                                  commit synced; read back
 *   dbs lmdb-check DIR K           keys 0..K all there, values right
 *   dbs sqlite-bench DB N          N one-row transactions: prints tx/s
 *   dbs lmdb-bench DIR N           N one-put synced commits: prints puts/s
 *
 * With "report" each commit prints "committed K" (the rows or keys
 * durable so far), flushed, so a test can kill -9 the run at any point
 * and then check that every committed one is there. Exits 1 with the
 * failing line on any error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <lmdb.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "check.h"

#define SQL(db, stmt) CHECK(sqlite3_exec(db, stmt, NULL, NULL, NULL) == SQLITE_OK)
#define MDB(call) CHECK((call) == MDB_SUCCESS)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* The 100-byte value of row or key `i`. */
static void value_of(long i, char *out) {
    for (int k = 0; k < 100; k++)
        out[k] = 'a' + (char)((i * 31 + k * 7) % 26);
}

static sqlite3 *sqlite_open(const char *path) {
    sqlite3 *db;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0);
    sqlite3_finalize(st);
    SQL(db, "PRAGMA synchronous=FULL");
    SQL(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)");
    return db;
}

/* `n` one-row transactions; with `report`, the count after each. */
static void sqlite_insert(sqlite3 *db, long n, int report) {
    sqlite3_stmt *ins;
    CHECK(sqlite3_prepare_v2(db, "INSERT INTO t(id, v) VALUES (?, ?)", -1, &ins, NULL) ==
          SQLITE_OK);
    char v[100];
    for (long i = 1; i <= n; i++) {
        value_of(i, v);
        sqlite3_bind_int64(ins, 1, i);
        sqlite3_bind_blob(ins, 2, v, sizeof v, SQLITE_STATIC);
        CHECK(sqlite3_step(ins) == SQLITE_DONE);
        sqlite3_reset(ins);
        if (report) {
            printf("committed %ld\n", i);
            fflush(stdout);
        }
    }
    sqlite3_finalize(ins);
}

static void sqlite_integrity(sqlite3 *db) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0);
    sqlite3_finalize(st);
}

/* Rows 1..k are all there with their values, and no row past the last. */
static void sqlite_check(sqlite3 *db, long k) {
    sqlite_integrity(db);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "SELECT id, v FROM t ORDER BY id", -1, &st, NULL) == SQLITE_OK);
    long want = 1;
    char v[100];
    while (sqlite3_step(st) == SQLITE_ROW) {
        CHECK(sqlite3_column_int64(st, 0) == want);
        value_of(want, v);
        CHECK(sqlite3_column_bytes(st, 1) == 100 && memcmp(sqlite3_column_blob(st, 1), v, 100) == 0);
        want++;
    }
    sqlite3_finalize(st);
    CHECK(want - 1 >= k);
    printf("sqlite: %ld rows, rows 1..%ld there, integrity ok\n", want - 1, k);
}

static void sqlite_run(const char *path, long n, int report) {
    sqlite3 *db = sqlite_open(path);
    sqlite_insert(db, n, report);
    int log, done;
    CHECK(sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &done) == SQLITE_OK);
    sqlite_check(db, n);
    CHECK(sqlite3_close(db) == SQLITE_OK);
}

static void lmdb_open(const char *dir, MDB_env **env, MDB_dbi *dbi) {
    mkdir(dir, 0755);
    MDB(mdb_env_create(env));
    MDB(mdb_env_set_mapsize(*env, 256 << 20));
    MDB(mdb_env_open(*env, dir, 0, 0644));
    MDB_txn *txn;
    MDB(mdb_txn_begin(*env, NULL, 0, &txn));
    MDB(mdb_dbi_open(txn, NULL, 0, dbi));
    MDB(mdb_txn_commit(txn));
}

/* `n` puts, `per` in each synced transaction; with `report`, the keys
 * committed after each. */
static void lmdb_insert(MDB_env *env, MDB_dbi dbi, long n, long per, int report) {
    char v[100];
    for (long i = 0; i < n;) {
        MDB_txn *txn;
        MDB(mdb_txn_begin(env, NULL, 0, &txn));
        for (long k = 0; k < per && i < n; k++, i++) {
            unsigned long long key = __builtin_bswap64((unsigned long long)i);
            value_of(i, v);
            MDB_val kv = {sizeof key, &key}, vv = {sizeof v, v};
            MDB(mdb_put(txn, dbi, &kv, &vv, 0));
        }
        MDB(mdb_txn_commit(txn));
        if (report) {
            printf("committed %ld\n", i);
            fflush(stdout);
        }
    }
}

/* Keys 0..k-1 are all there with their values, in order, nothing else
 * out of order. */
static void lmdb_check(MDB_env *env, MDB_dbi dbi, long k) {
    MDB_txn *txn;
    MDB_cursor *c;
    MDB(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
    MDB(mdb_cursor_open(txn, dbi, &c));
    MDB_val kv, vv;
    long want = 0;
    char v[100];
    while (mdb_cursor_get(c, &kv, &vv, want ? MDB_NEXT : MDB_FIRST) == MDB_SUCCESS) {
        unsigned long long key;
        CHECK(kv.mv_size == sizeof key);
        memcpy(&key, kv.mv_data, sizeof key);
        CHECK((long)__builtin_bswap64(key) == want);
        value_of(want, v);
        CHECK(vv.mv_size == 100 && memcmp(vv.mv_data, v, 100) == 0);
        want++;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    CHECK(want >= k);
    printf("lmdb: %ld keys, keys 0..%ld there\n", want, k);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: dbs sqlite-run|sqlite-check|lmdb-run|lmdb-check|sqlite-bench|lmdb-bench PATH N [report]\n");
        return 2;
    }
    const char *cmd = argv[1], *path = argv[2];
    long n = atol(argv[3]);
    int report = argc > 4 && strcmp(argv[4], "report") == 0;
    MDB_env *env;
    MDB_dbi dbi;
    if (strcmp(cmd, "sqlite-run") == 0) {
        sqlite_run(path, n, report);
    } else if (strcmp(cmd, "sqlite-check") == 0) {
        sqlite3 *db = sqlite_open(path);
        sqlite_check(db, n);
        CHECK(sqlite3_close(db) == SQLITE_OK);
    } else if (strcmp(cmd, "sqlite-bench") == 0) {
        sqlite3 *db = sqlite_open(path);
        double t = now();
        sqlite_insert(db, n, 0);
        printf("%.0f tx/s\n", n / (now() - t));
        CHECK(sqlite3_close(db) == SQLITE_OK);
    } else if (strcmp(cmd, "lmdb-run") == 0) {
        lmdb_open(path, &env, &dbi);
        lmdb_insert(env, dbi, n, 100, report);
        lmdb_check(env, dbi, n);
        mdb_env_close(env);
        lmdb_open(path, &env, &dbi);
        lmdb_check(env, dbi, n);
        mdb_env_close(env);
    } else if (strcmp(cmd, "lmdb-check") == 0) {
        lmdb_open(path, &env, &dbi);
        lmdb_check(env, dbi, n);
        mdb_env_close(env);
    } else if (strcmp(cmd, "lmdb-bench") == 0) {
        lmdb_open(path, &env, &dbi);
        double t = now();
        lmdb_insert(env, dbi, n, 1, 0);
        printf("%.0f puts/s\n", n / (now() - t));
        mdb_env_close(env);
    } else {
        fprintf(stderr, "dbs: unknown command %s\n", cmd);
        return 2;
    }
    return 0;
}
