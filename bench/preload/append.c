/*
 * Unaligned appends, each made durable: N records of SIZE bytes, each a
 * write(2) followed by fdatasync (a log, or a WAL that is never reset).
 * Prints records/s, timed from the first record (the interposer opens
 * the pool at the open, before it).
 *
 *   append FILE N SIZE
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/preload/check.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: append FILE N SIZE\n");
        return 2;
    }
    long n = atol(argv[2]), size = atol(argv[3]);
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    char *buf = calloc(1, size);
    CHECK(fd >= 0 && buf != NULL);
    double t = now();
    for (long i = 0; i < n; i++) {
        buf[0] = (char)i;
        CHECK(write(fd, buf, size) == size && fdatasync(fd) == 0);
    }
    printf("%.0f records/s\n", n / (now() - t));
    CHECK(close(fd) == 0);
    return 0;
}
