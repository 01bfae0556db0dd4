/*
 * Sequential reads of a mapped file against memcpy from the pool itself
 * (bench/mapped.sh; issue 31's "no copy" goal): under the interposer a
 * shared mapping of a file is the pool's own pages, so reading through it
 * should cost what copying the pool's memory costs.
 *
 *   read make FILE MIB           write FILE: MIB MiB in 1 MiB writes, fsync
 *   read read POOL FILE MIB REPS map FILE (shared, read-only) and the same
 *                                length of POOL (the pool file, outside the
 *                                mount: the kernel's mapping); after one
 *                                pass over each to fault their pages in,
 *                                REPS passes of each, interleaved, copying
 *                                1 MiB at a time into one buffer; prints
 *                                "mapped GIB/S pool GIB/S" per pass
 *   read sync FILE MIB REPS      map FILE (MIB MiB, shared, read-write),
 *                                store into every page, then REPS times:
 *                                store a byte, time fsync(FILE) (every
 *                                line of the mapping written back) and
 *                                msync of its first 4 KiB; prints
 *                                "fsync MS msync MS" per rep
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/preload/check.h"

#define MIB (1L << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* One pass over `len` bytes at `p`, 1 MiB at a time into `buf`; GiB/s. */
static double pass(const char *p, long len, char *buf) {
    double t = now();
    for (long off = 0; off < len; off += MIB)
        memcpy(buf, p + off, MIB);
    /* Keep the copies: the buffer is read once. */
    volatile char sink = buf[MIB - 1];
    (void)sink;
    return len / (double)(1L << 30) / (now() - t);
}

static void make(const char *path, long mib) {
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0);
    char *buf = malloc(MIB);
    CHECK(buf != NULL);
    for (long i = 0; i < mib; i++) {
        memset(buf, (int)(i % 251), MIB);
        CHECK(pwrite(fd, buf, MIB, i * MIB) == MIB);
    }
    CHECK(fsync(fd) == 0 && close(fd) == 0);
    free(buf);
}

static const char *map(const char *path, long len) {
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    const char *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED && close(fd) == 0);
    return p;
}

/* What fsync and msync of a written mapping cost (`read sync`). */
static void sync_costs(const char *path, long len, int reps) {
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    CHECK(fd >= 0 && ftruncate(fd, len) == 0);
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    for (long i = 0; i < len; i += 4096)
        p[i] = 1;
    for (int r = 0; r < reps; r++) {
        p[r] = 2;
        double t = now();
        CHECK(fsync(fd) == 0);
        double f = now() - t;
        p[r] = 3;
        t = now();
        CHECK(msync(p, 4096, MS_SYNC) == 0);
        printf("fsync %.3f msync %.4f\n", f * 1e3, (now() - t) * 1e3);
    }
    CHECK(munmap(p, len) == 0 && close(fd) == 0);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "make") == 0) {
        make(argv[2], atol(argv[3]));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "sync") == 0) {
        sync_costs(argv[2], atol(argv[3]) * MIB, atoi(argv[4]));
        return 0;
    }
    if (argc != 6 || strcmp(argv[1], "read") != 0) {
        fprintf(stderr, "usage: read make FILE MIB | read read POOL FILE MIB REPS | read sync FILE MIB REPS\n");
        return 2;
    }
    long len = atol(argv[4]) * MIB;
    int reps = atoi(argv[5]);
    const char *file = map(argv[3], len), *pool = map(argv[2], len);
    char *buf = malloc(MIB);
    CHECK(buf != NULL);
    pass(file, len, buf);
    pass(pool, len, buf);
    for (int r = 0; r < reps; r++) {
        double m = pass(file, len, buf);
        double p = pass(pool, len, buf);
        printf("mapped %.3f pool %.3f\n", m, p);
    }
    return 0;
}
