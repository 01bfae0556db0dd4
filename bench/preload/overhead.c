/*
 * The interposer's own cost, per call (issue 16's goals: under 100 ns per
 * served call, under 5% on a call it passes through).
 *
 *   overhead served FILE N        pread(2) of 128 B from FILE, N times
 *                                 (run under LD_PRELOAD, FILE in the pool)
 *   overhead library POOL N       the same through libamberfs on POOL
 *   overhead kernel FILE N [TOUCH] pread(2) and stat(2) of a kernel FILE
 *                                 (run with and without LD_PRELOAD; with
 *                                 TOUCH, a path in the pool, stat'ed
 *                                 first so the interposer holds the pool)
 *   overhead kernel-mt FILE N     as kernel, with one idle thread running:
 *                                 an open pool runs Amber's background
 *                                 threads, and Linux and glibc charge a
 *                                 multi-threaded process more for every
 *                                 descriptor call (a file reference taken
 *                                 and dropped, asynchronous cancellation
 *                                 switched on and off) than a
 *                                 single-threaded one
 *   overhead write FILE N SIZE    fsync'd random writes: pwrite(2) of SIZE
 *                                 bytes at a random SIZE-aligned offset of
 *                                 a 64 MiB FILE, then fsync(2), N times
 *                                 (on any target: served, the mount, ext4)
 *   overhead library-write POOL N SIZE  the same loop through libamberfs
 *
 * The write modes are the same C loop on every path, so their ratios are
 * the interposer's against the library without fio's own cost per I/O.
 * Prints "name ns_per_call" lines; the best of 5 rounds of N calls.
 */
#define _GNU_SOURCE
#include <amberfs.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

#define BEST(name, n, body)                                                  \
    do {                                                                     \
        double best = 1e30;                                                  \
        for (int round = 0; round < 5; round++) {                            \
            double t0 = now_ns();                                            \
            for (long i = 0; i < (n); i++) {                                 \
                body;                                                        \
            }                                                                \
            double per = (now_ns() - t0) / (n);                              \
            if (per < best) best = per;                                      \
        }                                                                    \
        printf("%s %.1f\n", name, best);                                     \
    } while (0)

static void need(int ok, const char *what) {
    if (!ok) {
        perror(what);
        exit(1);
    }
}

#define FILE_SIZE (64L << 20)

/* The same offsets on every path: xorshift64 from a fixed seed. */
static long next_offset(unsigned long *x, long size) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (long)(*x % (unsigned long)(FILE_SIZE / size)) * size;
}

static char wbuf[1 << 20];

static void *idle(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

/* fsync'd random writes through the kernel's calls (or the interposer's). */
static int kernel_writes(const char *path, long n, long size) {
    unsigned long x = 88172645463325252UL;
    char name[64];
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    need(fd >= 0, "open");
    for (long off = 0; off < FILE_SIZE; off += sizeof wbuf)
        need(pwrite(fd, wbuf, sizeof wbuf, off) == sizeof wbuf, "fill");
    need(fsync(fd) == 0, "fsync");
    snprintf(name, sizeof name, "write%ld", size);
    BEST(name, n, {
        need(pwrite(fd, wbuf, size, next_offset(&x, size)) == size, "pwrite");
        need(fsync(fd) == 0, "fsync");
    });
    return close(fd);
}

/* The same loop through libamberfs on POOL. */
static int library_writes(const char *pool, long n, long size) {
    unsigned long x = 88172645463325252UL;
    char name[64];
    struct amberfs *fs = amberfs_mount(pool, NULL, getenv("AMBERFS_EMULATE"));
    need(fs != NULL, "amberfs_mount");
    int fd = amberfs_open(fs, "/w", O_CREAT | O_RDWR, 0644);
    need(fd >= 0, "amberfs_open");
    for (long off = 0; off < FILE_SIZE; off += sizeof wbuf)
        need(amberfs_pwrite(fs, fd, wbuf, sizeof wbuf, off) == sizeof wbuf, "fill");
    need(amberfs_fsync(fs, fd) == 0, "fsync");
    snprintf(name, sizeof name, "library_write%ld", size);
    BEST(name, n, {
        need(amberfs_pwrite(fs, fd, wbuf, size, next_offset(&x, size)) == size, "pwrite");
        need(amberfs_fsync(fs, fd) == 0, "fsync");
    });
    amberfs_close(fs, fd);
    return amberfs_unmount(fs);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s served|library|kernel|kernel-mt|write|library-write FILE|POOL N [TOUCH|SIZE]\n",
                argv[0]);
        return 2;
    }
    long n = atol(argv[3]);
    if (strcmp(argv[1], "write") == 0 || strcmp(argv[1], "library-write") == 0) {
        long size = argc == 5 ? atol(argv[4]) : 0;
        need(size > 0 && size <= (long)sizeof wbuf && FILE_SIZE % size == 0, "SIZE");
        return argv[1][0] == 'w' ? kernel_writes(argv[2], n, size) : library_writes(argv[2], n, size);
    }
    char buf[128];
    if (strcmp(argv[1], "library") == 0) {
        struct amberfs *fs = amberfs_mount(argv[2], NULL, NULL);
        need(fs != NULL, "amberfs_mount");
        int fd = amberfs_open(fs, "/f", O_CREAT | O_RDWR, 0644);
        need(fd >= 0 && amberfs_pwrite(fs, fd, buf, sizeof buf, 0) == sizeof buf, "write");
        BEST("library_pread", n, need(amberfs_pread(fs, fd, buf, sizeof buf, 0) == sizeof buf, "pread"));
        amberfs_close(fs, fd);
        return amberfs_unmount(fs);
    }
    struct stat touched;
    if (argc == 5) stat(argv[4], &touched);
    pthread_t thread;
    if (strcmp(argv[1], "kernel-mt") == 0) need(pthread_create(&thread, NULL, idle, NULL) == 0, "thread");
    int fd = open(argv[2], O_CREAT | O_RDWR, 0644);
    need(fd >= 0 && pwrite(fd, buf, sizeof buf, 0) == sizeof buf, "write");
    if (strcmp(argv[1], "served") == 0) {
        BEST("served_pread", n, need(pread(fd, buf, sizeof buf, 0) == sizeof buf, "pread"));
    } else {
        struct stat st;
        BEST("kernel_pread", n, need(pread(fd, buf, sizeof buf, 0) == sizeof buf, "pread"));
        BEST("kernel_stat", n, need(stat(argv[2], &st) == 0, "stat"));
    }
    return close(fd);
}
