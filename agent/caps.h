/* Whether this process holds a capability in its effective set. */
#ifndef CODEXRAY_AGENT_CAPS_H
#define CODEXRAY_AGENT_CAPS_H

#include <linux/capability.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* False when it does not, or when capget fails. */
static inline bool caps__have(int cap)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];

    memset(d, 0, sizeof(d));
    if (syscall(SYS_capget, &h, d))
        return false;
    return d[cap / 32].effective & (1u << (cap % 32));
}

#endif
