/* What test_py_layout.c and test_py_layout_hostile.c share: 3.13.0's
 * _Py_DebugOffsets as the interpreter carries it. */
#ifndef CODEXRAY_TESTS_PY_LAYOUT_HELPERS_H
#define CODEXRAY_TESTS_PY_LAYOUT_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/runtimes/python/py_detect.h"
#include "../../agent/runtimes/python/py_layout.h"
#include "py_helpers.h"

/* The 3.13.0 _Py_DebugOffsets, as libpython3.13.so.1.0 of pyenv's 3.13.0
 * holds it (x86-64, gcc): 73 words, the cookie first. The hostile tests
 * start from it, so they run without pyenv; where 3.13.0 is installed,
 * test_debug_offsets_against_headers checks it is still its bytes. */
#define DBG313_WORDS 73
static const uint64_t dbg313[DBG313_WORDS] = {
    0x7970677562656478ull, /* "xdebugpy" */
    0x30d00f0,
    0,
    283320,
    608,
    632,
    194968,
    7272,
    7264,
    7344,
    7400,
    7656,
    7640,
    7648,
    16,
    7752,
    0,
    7768,
    7760,
    304,
    0,
    8,
    16,
    72,
    152,
    160,
    232,
    32,
    80,
    8,
    0,
    56,
    72,
    70,
    208,
    112,
    120,
    128,
    136,
    68,
    52,
    96,
    104,
    200,
    16,
    8,
    416,
    24,
    88,
    168,
    32,
    24,
    16,
    40,
    24,
    16,
    48,
    32,
    40,
    24,
    16,
    32,
    16,
    24,
    40,
    16,
    32,
    64,
    32,
    16,
    40,
    240,
    200,
};

#endif
