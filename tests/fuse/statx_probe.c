/*
 * Does this kernel pass a FUSE daemon's statx attributes (stx_attributes,
 * e.g. STATX_ATTR_APPEND) to the caller? fuser 0.18, which the mount is
 * built on, has no FUSE_STATX request, so this asks the kernel directly:
 * a minimal FUSE server on /dev/fuse (protocol 7.41 structures, written
 * out here since older kernel headers lack them) with one file, "f",
 * whose FUSE_STATX answer says append-only. It prints whether the kernel
 * sent FUSE_STATX and what statx(2) returned.
 *
 *   cc -O2 -o statx_probe tests/fuse/statx_probe.c -lpthread && ./statx_probe DIR   (root)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

enum { LOOKUP = 1, GETATTR = 3, INIT = 26, STATX = 52 };

struct in_header { uint32_t len, opcode; uint64_t unique, nodeid; uint32_t uid, gid, pid; uint16_t extlen, pad; };
struct out_header { uint32_t len; int32_t error; uint64_t unique; };
struct attr { uint64_t ino, size, blocks, atime, mtime, ctime; uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags; };
struct entry_out { uint64_t nodeid, generation, entry_valid, attr_valid; uint32_t entry_valid_nsec, attr_valid_nsec; struct attr attr; };
struct attr_out { uint64_t attr_valid; uint32_t attr_valid_nsec, dummy; struct attr attr; };
struct init_out { uint32_t major, minor, max_readahead, flags; uint16_t max_background, congestion_threshold; uint32_t max_write, time_gran; uint16_t max_pages, map_alignment; uint32_t flags2, max_stack_depth; uint16_t timeout, unused[11]; };
struct sx_time { int64_t sec; uint32_t nsec; int32_t reserved; };
struct sx { uint32_t mask, blksize; uint64_t attributes; uint32_t nlink, uid, gid; uint16_t mode, spare0; uint64_t ino, size, blocks, attributes_mask; struct sx_time atime, btime, ctime, mtime; uint32_t rdev_major, rdev_minor, dev_major, dev_minor; uint64_t spare2[14]; };
struct statx_out { uint64_t attr_valid; uint32_t attr_valid_nsec, flags; uint64_t spare[2]; struct sx stat; };

_Static_assert(sizeof(struct entry_out) == 128, "fuse_entry_out");
_Static_assert(sizeof(struct init_out) == 64, "fuse_init_out");
_Static_assert(sizeof(struct statx_out) == 288, "fuse_statx_out");

static int fd;
static volatile int saw_statx;

static void reply(uint64_t unique, int error, const void *body, size_t len) {
    char buf[4096];
    struct out_header h = { (uint32_t)(sizeof h + len), -error, unique };
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, body, len);
    if (write(fd, buf, h.len) < 0 && errno != ENOENT) perror("reply");
}

static struct attr attr_of(uint64_t ino) {
    struct attr a = { .ino = ino, .nlink = 1, .blksize = 4096 };
    a.mode = ino == 1 ? (S_IFDIR | 0755) : (S_IFREG | 0644);
    return a;
}

static void answer(struct in_header *h, char *body) {
    if (h->opcode == INIT) {
        struct init_out o = { .major = 7, .minor = 41, .max_write = 4096, .max_pages = 1 };
        reply(h->unique, 0, &o, sizeof o);
    } else if (h->opcode == LOOKUP && strcmp(body, "f") == 0) {
        struct entry_out o = { .nodeid = 2, .generation = 1, .attr = attr_of(2) };
        reply(h->unique, 0, &o, sizeof o);
    } else if (h->opcode == GETATTR) {
        struct attr_out o = { .attr = attr_of(h->nodeid) };
        reply(h->unique, 0, &o, sizeof o);
    } else if (h->opcode == STATX) {
        struct attr a = attr_of(h->nodeid);
        struct statx_out o = { 0 };
        saw_statx = 1;
        o.stat.mask = STATX_BASIC_STATS | STATX_BTIME;
        o.stat.blksize = 4096, o.stat.nlink = 1, o.stat.mode = (uint16_t)a.mode, o.stat.ino = a.ino;
        o.stat.attributes = STATX_ATTR_APPEND;
        o.stat.attributes_mask = STATX_ATTR_APPEND | STATX_ATTR_IMMUTABLE;
        reply(h->unique, 0, &o, sizeof o);
    } else if (h->opcode != 2 /* FORGET: no reply */) {
        reply(h->unique, ENOSYS, NULL, 0);
    }
}

static void *serve(void *unused) {
    (void)unused;
    static char buf[1 << 20];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < (ssize_t)sizeof(struct in_header)) return NULL;
        answer((struct in_header *)buf, buf + sizeof(struct in_header));
    }
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: statx_probe DIR\n"); return 2; }
    fd = open("/dev/fuse", O_RDWR);
    if (fd < 0) { perror("/dev/fuse"); return 1; }
    char opts[128];
    snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
    if (mount("statx-probe", argv[1], "fuse.statx-probe", MS_NOSUID | MS_NODEV, opts)) { perror("mount"); return 1; }
    pthread_t t;
    pthread_create(&t, NULL, serve, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    struct statx x;
    int r = statx(AT_FDCWD, path, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS | STATX_BTIME, &x);
    printf("kernel sent FUSE_STATX: %s\n", saw_statx ? "yes" : "no");
    if (r) perror("statx");
    else printf("stx_attributes %#llx (append %s), stx_attributes_mask %#llx\n",
                (unsigned long long)x.stx_attributes, x.stx_attributes & STATX_ATTR_APPEND ? "shown" : "not shown",
                (unsigned long long)x.stx_attributes_mask);
    umount2(argv[1], MNT_DETACH);
    return 0;
}
