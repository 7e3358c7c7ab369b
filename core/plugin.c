/*
 * Plugin registry and loader.  Modules are loaded only by an explicit call
 * (cw_plugins_load / cw_na_open), never from a library constructor.
 */
#include "plugin_int.h"
#include "cw_mutex.h"

#include <causeway/log.h>

#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef CW_BUILD_PLUGIN_PATH
#define CW_BUILD_PLUGIN_PATH ""
#endif
#ifndef CW_INSTALL_PLUGIN_DIR
#define CW_INSTALL_PLUGIN_DIR "/usr/local/lib/causeway"
#endif

#define PLUGIN_MAX    32
#define PLUGIN_PREFIX "cw-na-"
#define PLUGIN_SUFFIX ".so"

/* The first ABI-1 ops table ended before mem_restrict; plugins built
 * against it still load, with the ops they do not know left NULL. */
#define PLUGIN_OPS_MIN offsetof(struct cw_na_ops, mem_restrict)

/* The registered entry with its ops table widened to this core's size. */
struct plugin_copy {
    struct cw_na_plugin plugin;
    struct cw_na_ops ops;
};

struct plugin_entry {
    const struct cw_na_plugin *plugin; /* &copy->plugin */
    struct plugin_copy *copy;
    void *dl; /* NULL for plugins registered from the process itself */
    char *path;
    unsigned uses; /* open instances */
};

static pthread_mutex_t registry_lock = CW_MUTEX_INITIALIZER;
static struct plugin_entry registry[PLUGIN_MAX];
static unsigned registry_count;

#define PLUGIN_ERR(err, errlen, ...)                                           \
    do {                                                                       \
        if ((err) && (errlen))                                                 \
            snprintf((err), (errlen), __VA_ARGS__);                            \
    } while (0)

static struct plugin_entry *registry_find_locked(const char *name)
{
    CW_ASSERT_LOCKED(&registry_lock);
    for (unsigned i = 0; i < registry_count; i++)
        if (strcmp(registry[i].plugin->name, name) == 0)
            return &registry[i];
    return NULL;
}

static bool valid_plugin_name(const char *name)
{
    size_t len = strlen(name);

    if (len == 0 || len >= 16)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

/* Checks everything the core relies on before a plugin is registered. */
static cw_status_t plugin_check(const struct cw_na_plugin *p, char *err,
                                size_t errlen)
{
    const struct cw_na_ops *o;
    int rma;

    if (p->abi_version != CW_NA_ABI_VERSION) {
        PLUGIN_ERR(err, errlen, "ABI version %u, this core expects %u",
                   p->abi_version, CW_NA_ABI_VERSION);
        return CW_VERSION;
    }
    if (p->ops_size < PLUGIN_OPS_MIN ||
        p->ops_size > sizeof(struct cw_na_ops)) {
        PLUGIN_ERR(
            err, errlen, "ops table of %u bytes, this core expects %zu to %zu",
            p->ops_size, (size_t)PLUGIN_OPS_MIN, sizeof(struct cw_na_ops));
        return CW_VERSION;
    }
    if (p->name == NULL || !valid_plugin_name(p->name)) {
        PLUGIN_ERR(err, errlen, "missing or invalid plugin name");
        return CW_INVALID_ARG;
    }
    o = p->ops;
    if (o == NULL) {
        PLUGIN_ERR(err, errlen, "plugin '%s' has no ops table", p->name);
        return CW_INVALID_ARG;
    }
#define MANDATORY(op)                                                          \
    if (o->op == NULL) {                                                       \
        PLUGIN_ERR(err, errlen, "plugin '%s' lacks mandatory op %s", p->name,  \
                   #op);                                                       \
        return CW_INVALID_ARG;                                                 \
    }
    MANDATORY(init)
    MANDATORY(finalize)
    MANDATORY(query)
    MANDATORY(addr_lookup)
    MANDATORY(addr_self)
    MANDATORY(addr_dup)
    MANDATORY(addr_free)
    MANDATORY(addr_cmp)
    MANDATORY(addr_to_string)
    MANDATORY(addr_serialize_size)
    MANDATORY(addr_serialize)
    MANDATORY(addr_deserialize)
    MANDATORY(msg_send_unexpected)
    MANDATORY(msg_recv_unexpected)
    MANDATORY(msg_send_expected)
    MANDATORY(msg_recv_expected)
    MANDATORY(progress)
    MANDATORY(cancel)
#undef MANDATORY
    rma = !!o->mem_register + !!o->mem_release + !!o->mem_serialize_size +
          !!o->mem_serialize + !!o->mem_deserialize + !!o->put + !!o->get;
    if (rma != 0 && rma != 7) {
        PLUGIN_ERR(err, errlen,
                   "plugin '%s' has %d of the 7 memory/RMA ops: all or none",
                   p->name, rma);
        return CW_INVALID_ARG;
    }
    return CW_OK;
}

static cw_status_t registry_add_locked(const struct cw_na_plugin *p, void *dl,
                                       const char *path, char *err,
                                       size_t errlen)
{
    struct plugin_entry *e;
    cw_status_t st = plugin_check(p, err, errlen);

    CW_ASSERT_LOCKED(&registry_lock);
    if (st != CW_OK)
        return st;
    e = registry_find_locked(p->name);
    if (e != NULL) {
        PLUGIN_ERR(err, errlen, "plugin '%s' is already registered from %s",
                   p->name, e->path ? e->path : "the process");
        return CW_EXIST;
    }
    if (registry_count == PLUGIN_MAX) {
        PLUGIN_ERR(err, errlen, "too many plugins (%d)", PLUGIN_MAX);
        return CW_NOMEM;
    }
    e = &registry[registry_count];
    e->copy = calloc(1, sizeof(*e->copy));
    e->path = path ? strdup(path) : NULL;
    if (e->copy == NULL || (path && e->path == NULL)) {
        PLUGIN_ERR(err, errlen, "out of memory");
        free(e->copy);
        free(e->path);
        return CW_NOMEM;
    }
    e->copy->plugin = *p;
    memcpy(&e->copy->ops, p->ops, p->ops_size);
    e->copy->plugin.ops = &e->copy->ops;
    e->copy->plugin.ops_size = sizeof(e->copy->ops);
    e->plugin = &e->copy->plugin;
    e->dl = dl;
    e->uses = 0;
    registry_count++;
    return CW_OK;
}

cw_status_t cw_plugins_register(const struct cw_na_plugin *plugin)
{
    char err[256];
    cw_status_t st;

    if (plugin == NULL)
        return CW_INVALID_ARG;
    cw_log_init();
    cw_mutex_lock(&registry_lock);
    st = registry_add_locked(plugin, NULL, NULL, err, sizeof(err));
    cw_mutex_unlock(&registry_lock);
    if (st != CW_OK)
        CW_ERROR("plugin", "cannot register plugin: %s", err);
    return st;
}

/* Libraries a plugin pulls in must not take the application's signals.
 * Debian's libfabric links the PSM providers' libraries, and
 * libinfinipath's constructor installs handlers for SIGINT, SIGTERM,
 * SIGSEGV, SIGBUS, SIGILL and SIGABRT that print a backtrace and exit(1),
 * replacing the application's own: a server's SIGTERM handler never ran
 * and its shared-memory segments were left behind.  IPATH_NO_BACKTRACE
 * (and HFI_NO_BACKTRACE for libpsm2) turn that off, the variables Open
 * MPI sets for the same reason; a value the user set is kept.  Set once,
 * before the first dlopen. */
static void plugin_env_once(void)
{
    static bool done;

    CW_ASSERT_LOCKED(&registry_lock);
    if (done)
        return;
    done = true;
    (void)setenv("IPATH_NO_BACKTRACE", "1", 0);
    (void)setenv("HFI_NO_BACKTRACE", "1", 0);
}

static cw_status_t load_file_locked(const char *path, char *err, size_t errlen)
{
    const struct cw_na_plugin *p;
    void *dl;
    cw_status_t st;

    CW_ASSERT_LOCKED(&registry_lock);
    plugin_env_once();
    dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        PLUGIN_ERR(err, errlen, "dlopen(%s) failed: %s", path, dlerror());
        return CW_NOENT;
    }
    dlerror();
    p = dlsym(dl, CW_NA_PLUGIN_SYMBOL);
    if (p == NULL) {
        const char *why = dlerror();
        PLUGIN_ERR(err, errlen, "dlsym(%s, " CW_NA_PLUGIN_SYMBOL ") failed: %s",
                   path, why ? why : "symbol is NULL");
        st = CW_INVALID_ARG;
        goto err_close;
    }
    st = registry_add_locked(p, dl, path, err, errlen);
    if (st != CW_OK)
        goto err_close;
    return CW_OK;

err_close:
    dlclose(dl);
    return st;
}

cw_status_t cw_plugins_load_file(const char *path, char *err, size_t errlen)
{
    char buf[512];
    cw_status_t st;

    if (path == NULL)
        return CW_INVALID_ARG;
    cw_log_init();
    cw_mutex_lock(&registry_lock);
    st = load_file_locked(path, buf, sizeof(buf));
    cw_mutex_unlock(&registry_lock);
    if (st != CW_OK) {
        PLUGIN_ERR(err, errlen, "%s", buf);
        CW_DEBUG("plugin", "%s", buf);
    } else {
        CW_DEBUG("plugin", "loaded %s", path);
    }
    return st;
}

/* Calls fn(dir, ctx) for each directory of the search path, in order and
 * once each, until fn returns true.  Returns whether it did.  @p tried (may
 * be NULL) receives the directories visited, comma-separated. */
static bool search_path_each(const char *extra,
                             bool (*fn)(const char *dir, void *ctx), void *ctx,
                             char *tried, size_t tried_len)
{
    const char *lists[4] = {extra, getenv("CAUSEWAY_PLUGIN_PATH"),
                            CW_BUILD_PLUGIN_PATH, CW_INSTALL_PLUGIN_DIR};
    char seen[16][PATH_MAX];
    unsigned nseen = 0;

    if (tried && tried_len)
        tried[0] = '\0';
    for (size_t l = 0; l < 4; l++) {
        const char *next = lists[l];
        while (next && *next) {
            const char *start = next;
            const char *colon = strchr(start, ':');
            size_t len = colon ? (size_t)(colon - start) : strlen(start);
            char dir[PATH_MAX];
            bool dup = false;

            next = colon ? colon + 1 : NULL;
            if (len == 0 || len >= sizeof(dir))
                continue;
            memcpy(dir, start, len);
            dir[len] = '\0';
            for (unsigned i = 0; i < nseen && !dup; i++)
                dup = strcmp(seen[i], dir) == 0;
            if (dup)
                continue;
            if (nseen < 16)
                memcpy(seen[nseen++], dir, len + 1);
            if (tried && tried_len) {
                size_t used = strlen(tried);
                snprintf(tried + used, tried_len - used, "%s%s",
                         used ? ", " : "", dir);
            }
            if (fn(dir, ctx))
                return true;
        }
    }
    return false;
}

struct scan_ctx {
    unsigned loaded;
    unsigned failed;
};

/* Name a module file claims by its file name ("cw-na-ofi.so" -> "ofi"). */
static bool module_name_of(const char *file, char *name, size_t len)
{
    size_t flen = strlen(file);
    size_t plen = strlen(PLUGIN_PREFIX);
    size_t slen = strlen(PLUGIN_SUFFIX);

    if (flen <= plen + slen || strncmp(file, PLUGIN_PREFIX, plen) != 0 ||
        strcmp(file + flen - slen, PLUGIN_SUFFIX) != 0)
        return false;
    if (flen - plen - slen >= len)
        return false;
    memcpy(name, file + plen, flen - plen - slen);
    name[flen - plen - slen] = '\0';
    return true;
}

static bool scan_dir(const char *dir, void *arg)
{
    struct scan_ctx *ctx = arg;
    DIR *d = opendir(dir);
    struct dirent *de;

    if (d == NULL) {
        CW_DEBUG("plugin", "plugin directory %s: %s", dir, strerror(errno));
        return false;
    }
    while ((de = readdir(d)) != NULL) {
        char name[64];
        char path[PATH_MAX];
        char err[512];
        bool taken;

        if (!module_name_of(de->d_name, name, sizeof(name)))
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
            (int)sizeof(path))
            continue;
        cw_mutex_lock(&registry_lock);
        taken = registry_find_locked(name) != NULL;
        if (!taken && load_file_locked(path, err, sizeof(err)) != CW_OK) {
            ctx->failed++;
            CW_WARN("plugin", "skipping %s: %s", path, err);
        } else if (!taken) {
            ctx->loaded++;
            CW_DEBUG("plugin", "loaded plugin '%s' from %s", name, path);
        } else {
            CW_DEBUG("plugin", "%s shadowed by an earlier plugin '%s'", path,
                     name);
        }
        cw_mutex_unlock(&registry_lock);
    }
    closedir(d);
    return false;
}

cw_status_t cw_plugins_load(const char *dir)
{
    struct scan_ctx ctx = {0, 0};
    unsigned count;
    char tried[2048];

    cw_log_init();
    search_path_each(dir, scan_dir, &ctx, tried, sizeof(tried));
    cw_mutex_lock(&registry_lock);
    count = registry_count;
    cw_mutex_unlock(&registry_lock);
    if (count == 0) {
        CW_ERROR("plugin",
                 "no plugin module (cw-na-*.so) found; searched %s "
                 "(set CAUSEWAY_PLUGIN_PATH)",
                 tried);
        return CW_NOENT;
    }
    return CW_OK;
}

struct find_ctx {
    const char *name;
    char *tried;
    size_t tried_len;
    char err[512];
    cw_status_t st;
};

static bool try_dir_for(const char *dir, void *arg)
{
    struct find_ctx *ctx = arg;
    char path[PATH_MAX];
    struct stat sb;
    size_t used = strlen(ctx->tried);

    if (snprintf(path, sizeof(path), "%s/" PLUGIN_PREFIX "%s" PLUGIN_SUFFIX,
                 dir, ctx->name) >= (int)sizeof(path))
        return false;
    if (used + 3 < ctx->tried_len)
        snprintf(ctx->tried + used, ctx->tried_len - used, "%s%s",
                 used ? ", " : "", path);
    if (stat(path, &sb) != 0)
        return false;
    ctx->st = load_file_locked(path, ctx->err, sizeof(ctx->err));
    return true;
}

cw_status_t cw_plugin_get(const char *name, const struct cw_na_plugin **p_p,
                          char *err, size_t errlen)
{
    struct plugin_entry *e;
    char tried[1024] = "";
    struct find_ctx ctx = {name, tried, sizeof(tried), "", CW_NOENT};

    cw_log_init();
    cw_mutex_lock(&registry_lock);
    e = registry_find_locked(name);
    if (e == NULL) {
        if (!search_path_each(NULL, try_dir_for, &ctx, NULL, 0)) {
            cw_mutex_unlock(&registry_lock);
            PLUGIN_ERR(err, errlen,
                       "no plugin '%s': not registered and no module found "
                       "(tried %s)",
                       name, tried[0] ? tried : "no directory");
            return CW_NOENT;
        }
        if (ctx.st != CW_OK) {
            cw_mutex_unlock(&registry_lock);
            PLUGIN_ERR(err, errlen, "cannot load plugin '%s': %s", name,
                       ctx.err);
            return ctx.st;
        }
        e = registry_find_locked(name);
        if (e == NULL) {
            cw_mutex_unlock(&registry_lock);
            PLUGIN_ERR(err, errlen,
                       "module for '%s' registered a different name", name);
            return CW_NOENT;
        }
    }
    e->uses++;
    *p_p = e->plugin;
    cw_mutex_unlock(&registry_lock);
    return CW_OK;
}

void cw_plugin_put(const struct cw_na_plugin *plugin)
{
    cw_mutex_lock(&registry_lock);
    for (unsigned i = 0; i < registry_count; i++)
        if (registry[i].plugin == plugin && registry[i].uses > 0)
            registry[i].uses--;
    cw_mutex_unlock(&registry_lock);
}

const struct cw_na_plugin *cw_plugins_find(const char *name)
{
    struct plugin_entry *e;

    if (name == NULL)
        return NULL;
    cw_mutex_lock(&registry_lock);
    e = registry_find_locked(name);
    cw_mutex_unlock(&registry_lock);
    return e ? e->plugin : NULL;
}

cw_status_t cw_plugins_path(const char *name, char *buf, size_t len)
{
    struct plugin_entry *e;
    cw_status_t st = CW_NOENT;

    if (name == NULL || buf == NULL || len == 0)
        return CW_INVALID_ARG;
    cw_mutex_lock(&registry_lock);
    e = registry_find_locked(name);
    if (e != NULL) {
        const char *path = e->path ? e->path : "";
        st = strlen(path) < len ? CW_OK : CW_OVERFLOW;
        if (st == CW_OK)
            memcpy(buf, path, strlen(path) + 1);
    }
    cw_mutex_unlock(&registry_lock);
    return st;
}

cw_status_t cw_plugins_list(char *buf, size_t len)
{
    size_t used = 0;
    cw_status_t st = CW_OK;

    if (buf == NULL || len == 0)
        return CW_INVALID_ARG;
    buf[0] = '\0';
    cw_mutex_lock(&registry_lock);
    for (unsigned i = 0; i < registry_count; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? "," : "",
                         registry[i].plugin->name);
        if (n < 0 || (size_t)n >= len - used) {
            st = CW_OVERFLOW;
            break;
        }
        used += (size_t)n;
    }
    cw_mutex_unlock(&registry_lock);
    return st;
}

void cw_plugins_unload(void)
{
    unsigned kept = 0;

    cw_mutex_lock(&registry_lock);
    for (unsigned i = 0; i < registry_count; i++) {
        struct plugin_entry *e = &registry[i];
        if (e->uses > 0) {
            CW_WARN("plugin",
                    "plugin '%s' still has %u open instance(s); "
                    "not unloaded",
                    e->plugin->name, e->uses);
            registry[kept++] = *e;
            continue;
        }
        if (e->dl)
            dlclose(e->dl);
        free(e->path);
        free(e->copy);
    }
    registry_count = kept;
    cw_mutex_unlock(&registry_lock);
}
