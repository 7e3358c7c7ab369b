/*
 * na-verbs: choosing the ops table of a new instance.  rdma-core unless
 * CAUSEWAY_VERBS_FAKE names the fake device module (cw-verbs-fake.so, a
 * test-only build product that is never installed), which is then loaded
 * with dlopen and checked like a plugin: its entry symbol, ABI version and
 * table size.  Each instance holds one reference, so the module (and its
 * process-wide device state) lives as long as any instance using it.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vb_ops.h"

int vb_ops_acquire(const struct vb_ops **ops_p, void **handle_p, char *err,
                   size_t errlen)
{
    const char *path = getenv(VB_FAKE_ENV);
    const struct vb_fake_module *m;
    void *h;

    if (!path || !path[0]) {
        *ops_p = &vb_real_ops;
        *handle_p = NULL;
        return 0;
    }
    if (!strchr(path, '/')) {
        snprintf(err, errlen,
                 "%s=%s: name the fake device module by its path "
                 "(cw-verbs-fake.so in the build tree's na-verbs/)",
                 VB_FAKE_ENV, path);
        return -1;
    }
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "dlopen(%s) failed: %s", path, dlerror());
        return -1;
    }
    m = dlsym(h, VB_FAKE_ENTRY);
    if (!m) {
        snprintf(err, errlen, "%s: no symbol %s (not the fake device module)",
                 path, VB_FAKE_ENTRY);
        goto err_close;
    }
    if (m->abi != VB_FAKE_ABI || m->ops_size != sizeof(struct vb_ops) ||
        !m->ops) {
        snprintf(err, errlen,
                 "%s: fake module ABI %u, ops size %u; this plugin wants %u, "
                 "%zu (rebuild the tree)",
                 path, m->abi, m->ops_size, VB_FAKE_ABI, sizeof(struct vb_ops));
        goto err_close;
    }
    *ops_p = m->ops;
    *handle_p = h;
    return 0;

err_close:
    dlclose(h);
    return -1;
}

void vb_ops_release(void *handle)
{
    if (handle)
        dlclose(handle);
}
