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
 *
 * Prints "name ns_per_call" lines; the best of 5 rounds of N calls.
 */
#define _GNU_SOURCE
#include <amberfs.h>
#include <fcntl.h>
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

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s served|library|kernel FILE|POOL N [TOUCH]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[3]);
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
