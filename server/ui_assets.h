/* The web UI's files (server/ui/), embedded in the binary at build time by
 * tools/embed_ui.sh, so the server needs nothing beside it to serve them. */
#ifndef CODEXRAY_SERVER_UI_ASSETS_H
#define CODEXRAY_SERVER_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
    const char *path; /* "/ui/app.js" */
    const char *type; /* the Content-Type */
    const unsigned char *data;
    size_t len;
    const char *etag; /* quoted, as the ETag header carries it */
};

/* Static for the life of the process. */
extern const struct ui_asset ui_assets[];
extern const size_t ui_nassets;

#endif
