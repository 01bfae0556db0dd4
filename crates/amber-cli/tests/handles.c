/*
 * File handles through a mount (tests/mount.rs, file_handles_*):
 *
 *   handles save PATH HANDLE_FILE     name_to_handle_at(PATH) into HANDLE_FILE
 *   handles read MOUNT HANDLE_FILE    open_by_handle_at under MOUNT, print the
 *                                     file's first bytes; exit 2 on ESTALE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HANDLE 128

int main(int argc, char **argv) {
    if (argc != 4)
        return 64;
    struct file_handle *h = calloc(1, sizeof *h + MAX_HANDLE);
    if (h == NULL)
        return 1;
    if (strcmp(argv[1], "save") == 0) {
        int mount_id;
        h->handle_bytes = MAX_HANDLE;
        if (name_to_handle_at(AT_FDCWD, argv[2], h, &mount_id, 0) != 0) {
            perror("name_to_handle_at");
            return 1;
        }
        FILE *f = fopen(argv[3], "w");
        if (f == NULL || fwrite(h, sizeof *h + h->handle_bytes, 1, f) != 1 || fclose(f) != 0)
            return 1;
        return 0;
    }
    FILE *f = fopen(argv[3], "r");
    if (f == NULL || fread(h, 1, sizeof *h + MAX_HANDLE, f) < sizeof *h)
        return 1;
    fclose(f);
    int mount_fd = open(argv[2], O_RDONLY | O_DIRECTORY);
    int fd = open_by_handle_at(mount_fd, h, O_RDONLY);
    if (fd < 0) {
        int e = errno;
        perror("open_by_handle_at");
        return e == ESTALE ? 2 : 1;
    }
    char buf[64] = {0};
    if (read(fd, buf, sizeof buf - 1) < 0)
        return 1;
    fputs(buf, stdout);
    return 0;
}
