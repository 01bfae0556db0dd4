/*
 * Mapped files under the interposer (design.md §16), run with the pool's
 * mount directory as argv[1]; argv[2] "dax" when the pool is on DAX (then
 * MAP_SYNC must be accepted, else refused with EOPNOTSUPP), "fuse" on a
 * FUSE mount of a pool (the kernel's page cache maps the file, so the
 * pool does not list the mapping in user.amberfs.policy), "nomap" on a
 * pool that cannot map its blocks (device-DAX aligned to 2 MiB: only
 * ENODEV for a shared mapping, a private copy still works). Two mappings
 * of one file and pread/pwrite agree both ways through random stores and
 * writes; holes read zero; pages past the end of file raise SIGBUS and
 * follow the size; msync, mprotect, mremap, munmap of a middle part,
 * MADV_REMOVE, an unlinked mapped file, a forked child's stores, and the
 * access rules. Every check that fails prints its line and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "at.h"
#include "check.h"

#define PAGE 4096
/* On a FUSE mount: the page cache's mappings, which the pool never sees. */
static int fuse;

/* Which signal the last probe met: 0, SIGBUS or SIGSEGV. */
static sigjmp_buf jump;
static volatile sig_atomic_t caught;
static void on_fault(int sig) {
    caught = sig;
    siglongjmp(jump, 1);
}

/* Loads (or, with `store`, stores) one byte at p; returns the signal it
 * raised, or 0. */
static int probe(volatile char *p, int store) {
    caught = 0;
    if (sigsetjmp(jump, 1) == 0) {
        if (store)
            *p = 'p';
        else
            (void)*p;
    }
    return caught;
}

static unsigned long long rng = 88172645463325252ULL;
static unsigned long long next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Two mappings of one file and pread/pwrite through two descriptors:
 * random stores and writes, each seen at once everywhere. */
static void coherence(void) {
    const size_t len = 64 * PAGE;
    int fd = open(at("coherent"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    int fd2 = open(at("coherent"), O_RDWR);
    CHECK(fd >= 0 && fd2 >= 0 && ftruncate(fd, len) == 0);
    char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
    CHECK(a != MAP_FAILED && b != MAP_FAILED && a != b);
    char *model = calloc(1, len), buf[3 * PAGE];
    CHECK(memcmp(a, model, len) == 0);
    for (int i = 0; i < 2000; i++) {
        size_t n = 1 + next() % (i % 7 == 0 ? sizeof buf : 200);
        size_t off = next() % (len - n);
        for (size_t k = 0; k < n; k++)
            buf[k] = (char)next();
        switch (i % 4) {
        case 0: memcpy(a + off, buf, n); break;
        case 1: memcpy(b + off, buf, n); break;
        case 2: CHECK(pwrite(fd, buf, n, off) == (ssize_t)n); break;
        default: CHECK(pwrite(fd2, buf, n, off) == (ssize_t)n); break;
        }
        memcpy(model + off, buf, n);
        char back[sizeof buf];
        CHECK(memcmp(a + off, buf, n) == 0 && memcmp(b + off, buf, n) == 0);
        CHECK(pread(fd2, back, n, off) == (ssize_t)n && memcmp(back, buf, n) == 0);
    }
    CHECK(memcmp(a, model, len) == 0 && memcmp(b, model, len) == 0);
    CHECK(msync(a, len, MS_SYNC) == 0 && fsync(fd2) == 0);
    CHECK(msync(a, len, MS_ASYNC) == 0 && msync(a, len, MS_INVALIDATE) == 0);
    CHECK(msync(a, len, MS_SYNC | MS_ASYNC) == -1 && errno == EINVAL);
    char report[4096];
    ssize_t r = fgetxattr(fd, "user.amberfs.policy", report, sizeof report - 1);
    CHECK(r > 0);
    report[r] = 0;
    CHECK(fuse || strstr(report, "mapped=0-262144 rw-") != NULL);
    /* A mapping at an offset, and one MAP_FIXED over anonymous memory. */
    char *c = mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED, fd, 8 * PAGE);
    CHECK(c != MAP_FAILED && memcmp(c, model + 8 * PAGE, 2 * PAGE) == 0);
    char *anon = mmap(NULL, 4 * PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *d = mmap(anon + PAGE, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 3 * PAGE);
    CHECK(d == anon + PAGE && memcmp(d, model + 3 * PAGE, PAGE) == 0);
    d[5] = 'F';
    CHECK(a[3 * PAGE + 5] == 'F');
    CHECK(munmap(anon, 4 * PAGE) == 0 && munmap(c, 2 * PAGE) == 0);
    CHECK(munmap(a, len) == 0 && munmap(b, len) == 0);
    CHECK(close(fd) == 0 && close(fd2) == 0);
    free(model);
}

/* Holes read zero; pages past the end raise SIGBUS and follow the size
 * by write, ftruncate and fallocate; a shrink hides them again and zeroes
 * the new last page past the end. */
static void end_of_file(void) {
    int fd = open(at("grows"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0 && pwrite(fd, "head", 4, 0) == 4 && pwrite(fd, "x", 1, 3 * PAGE) == 1);
    char *p = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED && memcmp(p, "head", 4) == 0 && p[PAGE] == 0 && p[3 * PAGE] == 'x');
    CHECK(probe(p + 3 * PAGE + 100, 0) == 0 && p[3 * PAGE + 100] == 0);
    CHECK(probe(p + 4 * PAGE, 0) == SIGBUS && probe(p + 15 * PAGE, 1) == SIGBUS);
    CHECK(pwrite(fd, "later", 5, 6 * PAGE) == 5);
    CHECK(probe(p + 6 * PAGE, 0) == 0 && memcmp(p + 6 * PAGE, "later", 5) == 0);
    CHECK(p[5 * PAGE] == 0 && probe(p + 7 * PAGE, 0) == SIGBUS);
    CHECK(ftruncate(fd, 9 * PAGE) == 0 && probe(p + 8 * PAGE + 1, 1) == 0);
    CHECK(fallocate(fd, 0, 0, 11 * PAGE) == 0 && probe(p + 10 * PAGE, 0) == 0);
    p[2 * PAGE + 10] = 'z';
    CHECK(ftruncate(fd, 2 * PAGE + 10) == 0);
    CHECK(probe(p + 3 * PAGE, 0) == SIGBUS && p[2 * PAGE + 10] == 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 2 * PAGE + 10);
    CHECK(munmap(p, 16 * PAGE) == 0 && close(fd) == 0);
}

/* How many mappings of `fd` the pool lists (user.amberfs.policy). */
static int listed(int fd) {
    char report[8192];
    ssize_t r = fgetxattr(fd, "user.amberfs.policy", report, sizeof report - 1);
    CHECK(r > 0);
    report[r] = 0;
    int n = 0;
    for (char *s = report; (s = strstr(s, "mapped=")) != NULL; s++)
        n++;
    return n;
}

/* mprotect, mremap, munmap of a middle part, MADV_REMOVE. */
static void reshaping(void) {
    int fd = open(at("shapes"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    char page[PAGE];
    for (int i = 0; i < 8; i++) {
        memset(page, 'a' + i, PAGE);
        CHECK(pwrite(fd, page, PAGE, i * PAGE) == PAGE);
    }
    char *p = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    CHECK(mprotect(p + 2 * PAGE, PAGE, PROT_READ) == 0);
    CHECK(probe(p + 2 * PAGE, 1) == SIGSEGV && probe(p + 3 * PAGE, 1) == 0);
    CHECK(mprotect(p + 2 * PAGE, PAGE, PROT_READ | PROT_WRITE) == 0 && probe(p + 2 * PAGE, 1) == 0);
    CHECK(munmap(p + 4 * PAGE, PAGE) == 0 && probe(p + 4 * PAGE, 0) == SIGSEGV);
    CHECK(p[5 * PAGE] == 'f' && p[3 * PAGE] == 'p');
    CHECK(madvise(p + 6 * PAGE, PAGE, MADV_REMOVE) == 0 && p[6 * PAGE] == 0);
    char back = 1;
    CHECK(pread(fd, &back, 1, 6 * PAGE + 7) == 1 && back == 0);
    CHECK(madvise(p, PAGE, MADV_DONTNEED) == 0 && p[0] == 'a');
    CHECK(munmap(p, 4 * PAGE) == 0 && munmap(p + 5 * PAGE, 3 * PAGE) == 0);
    /* A mapping with an area after it: grown with MREMAP_MAYMOVE, it
     * moves and shows the same pages, then the file's next. */
    p = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *after = mmap(p + 4 * PAGE, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(p != MAP_FAILED);
    char *q = mremap(p, 4 * PAGE, 12 * PAGE, MREMAP_MAYMOVE);
    CHECK(q != MAP_FAILED && q[0] == 'a' && q[3 * PAGE] == 'p' && q[7 * PAGE] == 'h');
    CHECK(pwrite(fd, "nine", 4, 9 * PAGE) == 4 && memcmp(q + 9 * PAGE, "nine", 4) == 0);
    CHECK(probe(q + 11 * PAGE, 0) == SIGBUS);
    q = mremap(q, 12 * PAGE, 2 * PAGE, 0);
    CHECK(q != MAP_FAILED && q[PAGE] == 'b');
    CHECK(munmap(q, 2 * PAGE) == 0 && (after == MAP_FAILED || munmap(after, PAGE) == 0));
    /* Anonymous memory MAP_FIXED over part of a shared mapping replaces
     * that part: the pool stops counting it (a later msync or munmap of
     * it is the kernel's). */
    char *r = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(r != MAP_FAILED && (fuse || listed(fd) == 1));
    char *a = mmap(r + PAGE, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(a == r + PAGE && a[0] == 0 && (a[0] = 'x') == 'x' && r[0] == 'a');
    CHECK(fuse || listed(fd) == 2);
    CHECK(msync(a, PAGE, MS_SYNC) == 0);
    CHECK(munmap(r, 4 * PAGE) == 0 && (fuse || listed(fd) == 0));
    CHECK(close(fd) == 0);
}

/* An unlinked file lives while mapped; a forked child's stores reach the
 * parent's mapping; access rules as Linux's. */
static void lifetime_and_access(void) {
    int fd = open(at("gone"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, 2 * PAGE) == 0);
    char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED && close(fd) == 0 && unlink(at("gone")) == 0);
    strcpy(p, "still mapped");
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strcpy(p + PAGE, "from the child");
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(strcmp(p + PAGE, "from the child") == 0 && strcmp(p, "still mapped") == 0);
    CHECK(munmap(p, 2 * PAGE) == 0);
    int ro = open(at("ro"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(ro >= 0 && pwrite(ro, "data", 4, 0) == 4 && close(ro) == 0);
    ro = open(at("ro"), O_RDONLY);
    int wo = open(at("ro"), O_WRONLY);
    CHECK(mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0) == MAP_FAILED && errno == EACCES);
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, wo, 0) == MAP_FAILED && errno == EACCES);
    char *r = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, ro, 0);
    CHECK(r != MAP_FAILED && memcmp(r, "data", 4) == 0);
    CHECK(mprotect(r, PAGE, PROT_READ | PROT_WRITE) == -1 && errno == EACCES);
    CHECK(pwrite(wo, "DATA", 4, 0) == 4 && memcmp(r, "DATA", 4) == 0);
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, ro, 1) == MAP_FAILED && errno == EINVAL);
    CHECK(munmap(r, PAGE) == 0 && close(ro) == 0 && close(wo) == 0);
}

/* MAP_SYNC: accepted on a DAX pool, where a store and a flush are
 * durable; refused with EOPNOTSUPP elsewhere, as Linux refuses it. */
static void map_sync(int dax) {
    int fd = open(at("sync"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, PAGE) == 0);
    char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
    if (dax) {
        CHECK(p != MAP_FAILED);
        strcpy(p, "durable at the flush");
        CHECK(munmap(p, PAGE) == 0);
    } else {
        CHECK(p == MAP_FAILED && errno == EOPNOTSUPP);
    }
    /* Unknown flags are refused under MAP_SHARED_VALIDATE only. */
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED_VALIDATE | 0x400000, fd, 0) == MAP_FAILED &&
          errno == EOPNOTSUPP);
    CHECK(close(fd) == 0);
}

/* A pool that cannot map its blocks refuses a shared mapping with
 * ENODEV and still makes private copies. */
static void refused(void) {
    int fd = open(at("refused"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0 && pwrite(fd, "copy", 4, 0) == 4);
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED && errno == ENODEV);
    char *p = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(p != MAP_FAILED && memcmp(p, "copy", 4) == 0 && munmap(p, PAGE) == 0);
    CHECK(close(fd) == 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: mapped MOUNT [dax|fuse|nomap]\n");
        return 2;
    }
    if (argc > 2 && strcmp(argv[2], "nomap") == 0) {
        snprintf(M, sizeof M, "%s", argv[1]);
        refused();
        printf("mapped.c: ok (shared mappings refused)\n");
        return 0;
    }
    snprintf(M, sizeof M, "%s", argv[1]);
    fuse = argc > 2 && strcmp(argv[2], "fuse") == 0;
    struct sigaction sa = {.sa_handler = on_fault};
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGBUS, &sa, NULL) == 0 && sigaction(SIGSEGV, &sa, NULL) == 0);
    coherence();
    end_of_file();
    reshaping();
    lifetime_and_access();
    map_sync(argc > 2 && strcmp(argv[2], "dax") == 0);
    printf("mapped.c: ok\n");
    return 0;
}
