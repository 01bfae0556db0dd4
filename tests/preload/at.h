/*
 * Paths under the directory a C test runs in (its first argument, copied
 * into M): at("f") is M/f. Four results live at once, so a call may take
 * two paths.
 */
#ifndef AMBERFS_AT_H
#define AMBERFS_AT_H
#include <stdio.h>

static char M[2048];

static char *at(const char *rel) {
    static char buf[4][4096];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", M, rel);
    return buf[i];
}

#endif
