/*
 * The interposer's coverage, call by call, run under LD_PRELOAD with the
 * pool's mount directory as argv[1] (which need not exist in the kernel).
 * Every check that fails prints its line and exits 1.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "at.h"
#include "check.h"

static void basics(void) {
    int fd = open(at("f"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "hello world", 11) == 11);
    CHECK(pwrite(fd, "W", 1, 6) == 1);
    CHECK(lseek(fd, 0, SEEK_CUR) == 11);
    char b[32] = {0};
    CHECK(pread(fd, b, sizeof b, 0) == 11 && strcmp(b, "hello World") == 0);
    struct iovec v[2] = {{"ab", 2}, {"cd", 2}};
    CHECK(writev(fd, v, 2) == 4);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 15 && S_ISREG(st.st_mode));
    CHECK(fsync(fd) == 0 && fdatasync(fd) == 0);
    CHECK(ftruncate(fd, 5) == 0 && fstat(fd, &st) == 0 && st.st_size == 5);
    /* The kernel refuses a served descriptor instead of reaching a file. */
    CHECK(syscall(SYS_write, fd, "x", 1) == -1 && errno == EBADF);
    CHECK(close(fd) == 0);
    CHECK(open(at("f"), O_CREAT | O_EXCL | O_WRONLY, 0644) == -1 && errno == EEXIST);
    CHECK(open(at("nope/x"), O_RDONLY) == -1 && errno == ENOENT);
    CHECK(stat(at("f"), &st) == 0 && st.st_size == 5);
    CHECK(access(at("f"), R_OK | W_OK) == 0);
    int a = open(at("log"), O_CREAT | O_WRONLY | O_APPEND, 0600);
    CHECK(a >= 0 && write(a, "1", 1) == 1 && lseek(a, 0, SEEK_SET) == 0 && write(a, "2", 1) == 1);
    CHECK(fstat(a, &st) == 0 && st.st_size == 2 && (st.st_mode & 0777) == (0600 & ~umask(022)));
    CHECK(close(a) == 0);
}

static void namespace(void) {
    struct stat st;
    CHECK(mkdir(at("d"), 0755) == 0 && mkdir(at("d"), 0755) == -1 && errno == EEXIST);
    CHECK(rename(at("f"), at("d/g")) == 0 && stat(at("f"), &st) == -1 && errno == ENOENT);
    CHECK(link(at("d/g"), at("d/h")) == 0 && stat(at("d/g"), &st) == 0 && st.st_nlink == 2);
    CHECK(symlink("g", at("d/s")) == 0 && lstat(at("d/s"), &st) == 0 && S_ISLNK(st.st_mode));
    char t[64] = {0};
    CHECK(readlink(at("d/s"), t, sizeof t) == 1 && t[0] == 'g');
    CHECK(stat(at("d/s"), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 5);
    /* A symlink out of the pool leads to the kernel's file. */
    CHECK(symlink("/etc/hostname", at("d/out")) == 0);
    CHECK(stat(at("d/out"), &st) == 0 && stat("/etc/hostname", &st) == 0);
    CHECK(stat(at("d/../d/./g"), &st) == 0 && S_ISREG(st.st_mode));
    CHECK(chmod(at("d/g"), 0600) == 0 && stat(at("d/g"), &st) == 0 && (st.st_mode & 0777) == 0600);
    struct timespec ts[2] = {{1000000000, 5}, {1000000000, 7}};
    CHECK(utimensat(AT_FDCWD, at("d/g"), ts, 0) == 0 && stat(at("d/g"), &st) == 0);
    CHECK(st.st_mtim.tv_sec == 1000000000 && st.st_mtim.tv_nsec == 7);
    CHECK(setxattr(at("d/g"), "user.k", "v", 1, 0) == 0);
    char v[8] = {0};
    CHECK(getxattr(at("d/g"), "user.k", v, sizeof v) == 1 && v[0] == 'v');
    CHECK(truncate(at("d/h"), 100) == 0 && stat(at("d/g"), &st) == 0 && st.st_size == 100);
    CHECK(unlink(at("d/h")) == 0 && rmdir(at("d")) == -1 && errno == ENOTEMPTY);
    /* Across the pool's edge a rename cannot be atomic. */
    CHECK(rename(at("d/g"), "/tmp/amberfs-calls-x") == -1 && errno == EXDEV);
}

static void at_calls_and_cwd(void) {
    int d = open(at("d"), O_RDONLY | O_DIRECTORY);
    CHECK(d >= 0);
    int f = openat(d, "new", O_CREAT | O_WRONLY, 0644);
    CHECK(f >= 0 && write(f, "n", 1) == 1 && close(f) == 0);
    struct stat st;
    CHECK(fstatat(d, "new", &st, 0) == 0 && st.st_size == 1);
    CHECK(mkdirat(d, "sub", 0755) == 0 && renameat(d, "new", d, "sub/new") == 0);
    CHECK(unlinkat(d, "sub/new", 0) == 0 && unlinkat(d, "sub", AT_REMOVEDIR) == 0);
    CHECK(fchdir(d) == 0 && close(d) == 0);
    char cwd[4096];
    CHECK(getcwd(cwd, sizeof cwd) && strcmp(cwd, at("d")) == 0);
    CHECK(stat("g", &st) == 0 && S_ISREG(st.st_mode));
    int r = open("rel", O_CREAT | O_WRONLY, 0644);
    CHECK(r >= 0 && close(r) == 0 && stat(at("d/rel"), &st) == 0);
    CHECK(chdir("..") == 0 && getcwd(cwd, sizeof cwd) && strcmp(cwd, M) == 0);
    CHECK(unlink("d/rel") == 0);
    CHECK(chdir("/") == 0 && getcwd(cwd, sizeof cwd) && strcmp(cwd, "/") == 0);
}

static void dirs_and_stdio(void) {
    DIR *dir = opendir(at("d"));
    CHECK(dir != NULL);
    int n = 0, g = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        n++;
        g |= strcmp(e->d_name, "g") == 0 && e->d_type == DT_REG;
    }
    CHECK(n == 5 && g); /* . .. g s out */
    CHECK(dirfd(dir) >= 0);
    rewinddir(dir);
    CHECK(readdir(dir) != NULL && closedir(dir) == 0);
    FILE *w = fopen(at("s.txt"), "w");
    CHECK(w != NULL && fprintf(w, "line %d\n", 1) == 7 && fputs("line 2\n", w) >= 0);
    CHECK(fflush(w) == 0 && fileno(w) >= 0 && fsync(fileno(w)) == 0 && fclose(w) == 0);
    FILE *r = fopen(at("s.txt"), "r");
    char line[32];
    CHECK(r && fgets(line, sizeof line, r) && strcmp(line, "line 1\n") == 0);
    CHECK(fseek(r, -7, SEEK_END) == 0 && ftell(r) == 7 && fgets(line, sizeof line, r));
    CHECK(strcmp(line, "line 2\n") == 0 && fclose(r) == 0);
    FILE *a = fopen(at("s.txt"), "a+");
    CHECK(a && fwrite("x", 1, 1, a) == 1 && fclose(a) == 0);
    struct stat st;
    CHECK(stat(at("s.txt"), &st) == 0 && st.st_size == 15);
}

static void descriptors(void) {
    int fd = open(at("s.txt"), O_RDWR);
    CHECK(fd >= 0);
    int d = dup(fd);
    CHECK(d >= 0 && d != fd && lseek(fd, 3, SEEK_SET) == 3 && lseek(d, 0, SEEK_CUR) == 3);
    CHECK(dup2(fd, 100) == 100 && fcntl(100, F_GETFL) == O_RDWR);
    CHECK(fcntl(fd, F_SETFL, O_APPEND) == 0 && (fcntl(d, F_GETFL) & O_APPEND));
    CHECK(fcntl(d, F_SETFD, FD_CLOEXEC) == 0 && fcntl(d, F_GETFD) == FD_CLOEXEC);
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fcntl(fd, F_SETLK, &l) == 0 && fcntl(fd, F_GETLK, &l) == 0 && l.l_type == F_UNLCK);
    int other = open(at("s.txt"), O_RDONLY);
    CHECK(flock(fd, LOCK_EX) == 0 && flock(other, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK);
    CHECK(flock(fd, LOCK_UN) == 0 && flock(other, LOCK_SH | LOCK_NB) == 0);
    char *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, other, 0);
    CHECK(p != MAP_FAILED && memcmp(p, "line 1\n", 7) == 0 && p[20] == 0 && munmap(p, 4096) == 0);
    /* A writable private mapping is the program's own copy. */
    p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(p != MAP_FAILED && (p[0] = 'L') == 'L' && munmap(p, 4096) == 0);
    char first;
    CHECK(pread(fd, &first, 1, 0) == 1 && first == 'l');
    /* A shared mapping is the file's own pages (tests/preload/mapped.c
     * covers the rest). */
    int rw = open(at("s.txt"), O_RDWR);
    p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
    CHECK(p != MAP_FAILED && p[0] == 'l');
    CHECK(pwrite(rw, "M", 1, 1) == 1 && p[1] == 'M' && (p[1] = 'i') == 'i' && munmap(p, 4096) == 0);
    CHECK(pread(rw, &first, 1, 1) == 1 && first == 'i' && close(rw) == 0);
    CHECK(close(other) == 0 && close(d) == 0 && close(100) == 0 && close(fd) == 0);
    CHECK(close(fd) == -1 && errno == EBADF);
}

/* A served file dup'd onto 1 and 2 (a shell's redirect): libc's stdout
 * and stderr write into it, and are libc's own again once a kernel
 * descriptor is dup'd back; a redirected stdout left unflushed is written
 * at exit (main's last step). */
static void standard_streams(void) {
    int saved_out = dup(1), saved_err = dup(2);
    CHECK(saved_out >= 0 && saved_err >= 0 && fflush(stdout) == 0);
    int out = open(at("std.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(out >= 0 && dup2(out, 1) == 1 && dup2(out, 2) == 2 && close(out) == 0);
    CHECK(printf("out %d\n", 1) == 6 && fflush(stdout) == 0);
    CHECK(fputs("err\n", stderr) >= 0 && fileno(stdout) == 1);
    CHECK(dup2(saved_out, 1) == 1 && dup2(saved_err, 2) == 2);
    CHECK(close(saved_out) == 0 && close(saved_err) == 0);
    char buf[32] = {0};
    int in = open(at("std.txt"), O_RDONLY);
    CHECK(in >= 0 && read(in, buf, sizeof buf) == 10 && strcmp(buf, "out 1\nerr\n") == 0);
    /* Read through stdin too. */
    int saved_in = dup(0);
    CHECK(lseek(in, 0, SEEK_SET) == 0 && dup2(in, 0) == 0 && close(in) == 0);
    char line[16];
    CHECK(fgets(line, sizeof line, stdin) && strcmp(line, "out 1\n") == 0);
    CHECK(dup2(saved_in, 0) == 0 && close(saved_in) == 0);
}

/* Leaves stdout on a served file with a line unflushed: exit writes it. */
static void unflushed_at_exit(void) {
    int out = open(at("exit.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(out >= 0 && fflush(stdout) == 0 && dup2(out, 1) == 1 && close(out) == 0);
    CHECK(printf("written at exit\n") == 16);
}

static void fork_child(void) {
    int fd = open(at("s.txt"), O_RDONLY);
    CHECK(fd >= 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The child may not use its parent's pool: an inherited served
         * descriptor fails, and so does a path under the mount (EBUSY,
         * said on stderr), which never reaches the kernel's directory. */
        char c;
        int bad = read(fd, &c, 1) == -1 && errno == EBADF;
        struct stat st;
        int refused = stat(at("s.txt"), &st) == -1 && errno == EBUSY;
        int kept_out = creat(at("child.txt"), 0644) == -1 && errno == EBUSY;
        _exit(bad && refused && kept_out ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char c;
    CHECK(read(fd, &c, 1) == 1 && c == 'l' && close(fd) == 0);
}

/* statx shows chattr's append-only flag as ext4 does: "flagged" was made
 * append-only by the test before this ran; a new file has no flag. */
static void statx_attributes(void) {
    struct statx x;
    CHECK(statx(AT_FDCWD, at("flagged"), 0, STATX_BASIC_STATS, &x) == 0);
    CHECK(x.stx_attributes_mask & STATX_ATTR_APPEND);
    CHECK(x.stx_attributes_mask & STATX_ATTR_IMMUTABLE);
    CHECK(x.stx_attributes & STATX_ATTR_APPEND);
    CHECK(!(x.stx_attributes & STATX_ATTR_IMMUTABLE));
    int fd = open(at("plain"), O_CREAT | O_WRONLY, 0644);
    CHECK(fd >= 0 && close(fd) == 0);
    CHECK(statx(AT_FDCWD, at("plain"), 0, STATX_BASIC_STATS, &x) == 0);
    CHECK(!(x.stx_attributes & (STATX_ATTR_APPEND | STATX_ATTR_IMMUTABLE)));
}

/* A path pointer that cannot be the process's fails with EFAULT, as
 * libc's own wrappers do, instead of crashing the interposer that reads
 * it (pjdfstest's EFAULT cases pass NULL and (char *)-1). */
static void bad_pointers(void) {
    const char *bad[] = {NULL, (const char *)-1, (const char *)16};
    struct stat st;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(unlink(bad[i]) == -1 && errno == EFAULT);
        CHECK(open(bad[i], O_RDONLY) == -1 && errno == EFAULT);
        CHECK(stat(bad[i], &st) == -1 && errno == EFAULT);
        CHECK(mkdir(bad[i], 0755) == -1 && errno == EFAULT);
        CHECK(rename(bad[i], at("x")) == -1 && errno == EFAULT);
    }
    int fd = open(at("bad-buffers"), O_CREAT | O_RDWR, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, (const void *)-1, 8) == -1 && errno == EFAULT);
    CHECK(read(fd, (void *)-1, 8) == -1 && errno == EFAULT);
    CHECK(close(fd) == 0 && unlink(at("bad-buffers")) == 0);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    snprintf(M, sizeof M, "%s", argv[1]);
    basics();
    namespace();
    at_calls_and_cwd();
    dirs_and_stdio();
    descriptors();
    fork_child();
    standard_streams();
    statx_attributes();
    bad_pointers();
    printf("calls.c: ok\n");
    unflushed_at_exit();
    return 0;
}
