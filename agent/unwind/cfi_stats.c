/* The stats' names and their log line. */
#include "cfi_table.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

const char *cfi_table__unsup_name(enum cfi_table_unsup r)
{
    static const char *const names[CFI_UNSUP__N] = {
        [CFI_UNSUP_CFA_REG] = "cfa_reg", [CFI_UNSUP_CFA_EXPR] = "cfa_expr",
        [CFI_UNSUP_RA] = "ra",           [CFI_UNSUP_FP_RULE] = "fp_rule",
        [CFI_UNSUP_OFFSET] = "offset",   [CFI_UNSUP_CFI] = "bad_cfi",
    };
    return (unsigned)r < CFI_UNSUP__N ? names[r] : "?";
}

const char *cfi_table__skip_name(enum cfi_table_skip r)
{
    static const char *const names[CFI_SKIP__N] = {
        [CFI_SKIP_EMPTY] = "empty",     [CFI_SKIP_NOT_TEXT] = "not_text",
        [CFI_SKIP_OVERLAP] = "overlap", [CFI_SKIP_BAD] = "bad",
        [CFI_SKIP_TOO_BIG] = "too_big", [CFI_SKIP_FAR] = "far",
    };
    return (unsigned)r < CFI_SKIP__N ? names[r] : "?";
}

/* Appends " name count" for each nonzero count, after label. */
static size_t counts_str(char *buf, size_t len, size_t at, const char *label,
                         const uint32_t *counts, unsigned n, const char *(*name)(int))
{
    bool first = true;

    for (unsigned i = 0; i < n; i++) {
        if (!counts[i])
            continue;
        int w = snprintf(buf + (at < len ? at : len), at < len ? len - at : 0, "%s %s %u",
                         first ? label : ",", name((int)i), counts[i]);
        first = false;
        if (w > 0)
            at += (size_t)w;
    }
    return at;
}

static const char *unsup_name_int(int r)
{
    return cfi_table__unsup_name((enum cfi_table_unsup)r);
}

static const char *skip_name_int(int r)
{
    return cfi_table__skip_name((enum cfi_table_skip)r);
}

int cfi_table__stats_str(const struct cfi_table_stats *s, char *buf, size_t len)
{
    int w =
        snprintf(buf, len, "%s: %u FDEs, %u rows (%u before merging), %" PRIu64 " bytes, %.1f ms",
                 s->source == CFI_SRC_DEBUG_FRAME   ? "debug_frame"
                 : s->source == CFI_SRC_GOPCLNTAB   ? "gopclntab"
                 : s->source == CFI_SRC_EH_FRAME_GO ? "eh_frame+gopclntab"
                 : s->source == CFI_SRC_SYNTH       ? "no CFI, rows of our own"
                                                    : "eh_frame",
                 s->fdes, s->rows, s->rows_raw, s->bytes, (double)s->build_ns / 1e6);
    size_t at = w > 0 ? (size_t)w : 0;

    at = counts_str(buf, len, at, "; unsupported:", s->unsupported, CFI_UNSUP__N, unsup_name_int);
    at = counts_str(buf, len, at, "; FDEs skipped:", s->skipped, CFI_SKIP__N, skip_name_int);
    return at > INT32_MAX ? INT32_MAX : (int)at;
}
