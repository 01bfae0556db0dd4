/*
 * libamberfs from C: make a pool, write and read files, list a directory,
 * set an extended attribute, remount and read everything back.
 *
 *   cc -I crates/amber-ffi/include example.c -L target/release -lamberfs \
 *      -Wl,-rpath,$PWD/target/release -o example && ./example /dev/shm/ex.pool
 */
#include <amberfs.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: %s failed (errno %d: %s)\n", __FILE__,   \
                    __LINE__, #cond, errno, strerror(errno));                \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static void write_files(struct amberfs *fs) {
    CHECK(amberfs_mkdir(fs, "/docs", 0755) == 0);
    int fd = amberfs_open(fs, "/docs/hello.txt", O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0);
    const char *text = "hello from C\n";
    CHECK(amberfs_write(fs, fd, text, strlen(text)) == (ssize_t)strlen(text));
    struct iovec iov[2] = {{"vectored ", 9}, {"write\n", 6}};
    CHECK(amberfs_writev(fs, fd, iov, 2) == 15);
    CHECK(amberfs_pwrite(fs, fd, "H", 1, 0) == 1);
    CHECK(amberfs_fsync(fs, fd) == 0);
    CHECK(amberfs_lseek(fs, fd, 0, SEEK_SET) == 0);
    char buf[64] = {0};
    CHECK(amberfs_read(fs, fd, buf, sizeof buf) == 28);
    CHECK(strcmp(buf, "Hello from C\nvectored write\n") == 0);
    /* A served descriptor is a real kernel number that the kernel refuses. */
    CHECK(write(fd, "x", 1) == -1 && errno == EBADF);
    CHECK(amberfs_close(fs, fd) == 0);
    CHECK(amberfs_setxattr(fs, "/docs/hello.txt", "user.lang", "C", 1, 0) == 0);
    CHECK(amberfs_rename(fs, "/docs/hello.txt", "/docs/greeting.txt", 0) == 0);
    CHECK(amberfs_open(fs, "/docs/hello.txt", O_RDONLY, 0) == -1 && errno == ENOENT);
}

static void read_back(struct amberfs *fs) {
    struct stat st;
    CHECK(amberfs_stat(fs, "/docs/greeting.txt", &st) == 0);
    CHECK(S_ISREG(st.st_mode) && st.st_size == 28);
    char value[8] = {0};
    CHECK(amberfs_getxattr(fs, "/docs/greeting.txt", "user.lang", value, sizeof value) == 1);
    CHECK(value[0] == 'C');
    struct amberfs_dir *dir = amberfs_opendir(fs, "/docs");
    CHECK(dir != NULL);
    struct amberfs_dirent e;
    int entries = 0, found = 0;
    while (amberfs_readdir(dir, &e) == 1) {
        entries++;
        found |= strcmp(e.name, "greeting.txt") == 0 && e.kind == DT_REG;
    }
    CHECK(amberfs_closedir(dir) == 0);
    CHECK(entries == 3 && found); /* ".", "..", greeting.txt */
    struct statvfs sv;
    CHECK(amberfs_statfs(fs, &sv) == 0 && sv.f_bsize == 4096 && sv.f_bfree > 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s POOL (a path that does not exist yet)\n", argv[0]);
        return 2;
    }
    CHECK(amberfs_mkfs(argv[1], 64 << 20, NULL) == 0);
    struct amberfs *fs = amberfs_mount(argv[1], "policy=amber", "dram");
    CHECK(fs != NULL);
    /* One process at a time: a second mount of the same pool is refused. */
    CHECK(amberfs_mount(argv[1], NULL, NULL) == NULL && errno == EBUSY);
    write_files(fs);
    CHECK(amberfs_unmount(fs) == 0);
    fs = amberfs_mount(argv[1], NULL, NULL);
    CHECK(fs != NULL);
    read_back(fs);
    CHECK(amberfs_unlink(fs, "/docs/greeting.txt") == 0);
    CHECK(amberfs_rmdir(fs, "/docs") == 0);
    CHECK(amberfs_unmount(fs) == 0);
    printf("example.c: ok\n");
    return 0;
}
