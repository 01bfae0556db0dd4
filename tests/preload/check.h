/*
 * The one check of the C tests and benchmarks: a condition that fails
 * prints its file, line and errno, and the program exits 1.
 */
#ifndef AMBERFS_CHECK_H
#define AMBERFS_CHECK_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: %s failed (errno %d: %s)\n", __FILE__,     \
                    __LINE__, #cond, errno, strerror(errno));                  \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#endif
