/* Maps FILE (MIB MiB) MAP_SHARED read-write and times, in ms, the
 * mmap call, a load from each page, a store to each page, and
 * msync(MS_SYNC): what a first pass over a mapped file costs (issue 32
 * point 3, design.md §17.14); and how much the kernel's page cache grew
 * by the loads (its file pages, /proc/meminfo's Cached less Shmem, in
 * MiB: the pool's own pages are shared memory). Prints
 * "MMAP_MS LOAD_MS STORE_MS MSYNC_MS CACHED_MIB CHECKSUM".
 *
 *   touch FILE MIB
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Cached less Shmem, in KiB, from /proc/meminfo. */
static long file_cache_kib(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long cached = 0, shmem = 0, v;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "Cached: %ld", &v) == 1)
            cached = v;
        else if (sscanf(line, "Shmem: %ld", &v) == 1)
            shmem = v;
    }
    if (f)
        fclose(f);
    return cached - shmem;
}

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
    long cache0 = file_cache_kib();
    double t0 = now_ms();
    volatile unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    unsigned long sum = 0;
    double t1 = now_ms();
    for (size_t i = 0; i < len; i += 4096)
        sum += p[i];
    double t2 = now_ms();
    long cache1 = file_cache_kib();
    for (size_t i = 0; i < len; i += 4096)
        p[i + 1] = (unsigned char)i;
    double t3 = now_ms();
    if (msync((void *)p, len, MS_SYNC) != 0) {
        perror("msync");
        return 1;
    }
    double t4 = now_ms();
    printf("%.2f %.2f %.2f %.2f %ld %lu\n", t1 - t0, t2 - t1, t3 - t2, t4 - t3,
           (cache1 - cache0) / 1024, sum);
    munmap((void *)p, len);
    close(fd);
    return 0;
}
