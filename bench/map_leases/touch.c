/* Maps FILE (MIB MiB) MAP_SHARED read-write and times, in ms, a load
 * from each page, then a store to each page and msync(MS_SYNC): what a
 * first pass over a mapped file costs (issue 32 point 3, design.md
 * §17.14). Prints "LOAD_MS STORE_MS CHECKSUM".
 *
 *   touch FILE MIB
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: touch FILE MIB\n");
        return 2;
    }
    size_t len = (size_t)atol(argv[2]) << 20;
    int fd = open(argv[1], O_RDWR);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    volatile unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    unsigned long sum = 0;
    double t0 = now_ms();
    for (size_t i = 0; i < len; i += 4096)
        sum += p[i];
    double t1 = now_ms();
    for (size_t i = 0; i < len; i += 4096)
        p[i + 1] = (unsigned char)i;
    if (msync((void *)p, len, MS_SYNC) != 0) {
        perror("msync");
        return 1;
    }
    double t2 = now_ms();
    printf("%.2f %.2f %lu\n", t1 - t0, t2 - t1, sum);
    munmap((void *)p, len);
    close(fd);
    return 0;
}
