/*
 * NA instances: argument checking around the plugin ops, URI prefixes, and
 * the bounded blocking wait shared by every plugin.
 */
#include "plugin_int.h"

#include <causeway/addr.h>
#include <causeway/log.h>

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Longest single block in the kernel before a forced poll (design §6). */
#define NA_WAIT_SLICE_MS 1
/* Polling before the first block, so a quick answer costs no syscall. */
#define NA_SPIN_NS 20000ull

struct cw_na {
    const struct cw_na_plugin *plugin;
    const struct cw_na_ops *ops;
    cw_na_class_t *cls;
    struct cw_na_caps caps;
    uint32_t flags;
    char protocol[CW_URI_PROTOCOL_MAX];
    char prefix[CW_URI_PLUGIN_MAX + CW_URI_PROTOCOL_MAX + 4];
    size_t prefix_len;
};

static const struct cw_na_host na_host = {
    .version = CW_NA_ABI_VERSION,
    .log_level = &cw_log_level_,
    .log = cw_log_vwrite,
    .now_ns = cw_now_ns,
};

cw_status_t cw_plugins_describe(const char *name, cw_na_describe_cb_t emit,
                                void *arg)
{
    const struct cw_na_plugin *p;
    char err[512];
    cw_status_t st;

    if (name == NULL || emit == NULL)
        return CW_INVALID_ARG;
    /* A use count, so that the module stays while it describes itself. */
    st = cw_plugin_get(name, &p, err, sizeof(err));
    if (st != CW_OK) {
        CW_DEBUG("plugin", "%s", err);
        return st;
    }
    st = p->ops->describe != NULL ? p->ops->describe(&na_host, emit, arg)
                                  : CW_UNSUPPORTED;
    cw_plugin_put(p);
    return st;
}

cw_status_t cw_na_open(const char *uri, uint32_t flags,
                       const char *const *params, cw_na_t **na_p)
{
    struct cw_uri u;
    struct cw_na_init_info info;
    const struct cw_na_plugin *plugin;
    cw_na_t *na;
    char err[1536];
    cw_status_t st;

    if (uri == NULL || na_p == NULL ||
        (flags & ~(CW_NA_LISTEN | CW_NA_BUSY | CW_NA_ASYNC_RMA)) != 0)
        return CW_INVALID_ARG;
    cw_log_init();
    st = cw_uri_parse_err(uri, &u, err, sizeof(err));
    if (st != CW_OK) {
        CW_ERROR("na", "%s", err);
        return st;
    }
    st = cw_plugin_get(u.plugin, &plugin, err, sizeof(err));
    if (st != CW_OK) {
        CW_ERROR("na", "cannot open %s: %s", uri, err);
        return st;
    }
    if (plugin->ops->check_protocol &&
        !plugin->ops->check_protocol(u.protocol)) {
        CW_ERROR("na",
                 "cannot open %s: plugin '%s' does not support "
                 "protocol '%s' on this machine",
                 uri, u.plugin, u.protocol);
        st = CW_UNSUPPORTED;
        goto err_put;
    }
    na = calloc(1, sizeof(*na));
    if (na == NULL) {
        st = CW_NOMEM;
        goto err_put;
    }
    na->plugin = plugin;
    na->ops = plugin->ops;
    na->flags = flags;
    memcpy(na->protocol, u.protocol, sizeof(na->protocol));
    if (u.protocol[0])
        snprintf(na->prefix, sizeof(na->prefix), "%s+%s://", u.plugin,
                 u.protocol);
    else
        snprintf(na->prefix, sizeof(na->prefix), "%s://", u.plugin);
    na->prefix_len = strlen(na->prefix);

    info.protocol = u.protocol;
    info.location = u.location;
    info.flags = flags;
    info.params = params;
    st = na->ops->init(&na_host, &info, &na->cls);
    if (st != CW_OK) {
        CW_ERROR("na", "cannot open %s: %s", uri, cw_status_str(st));
        goto err_free;
    }
    na->ops->query(na->cls, &na->caps);
    *na_p = na;
    return CW_OK;

err_free:
    free(na);
err_put:
    cw_plugin_put(plugin);
    return st;
}

void cw_na_close(cw_na_t *na)
{
    if (na == NULL)
        return;
    na->ops->finalize(na->cls);
    cw_plugin_put(na->plugin);
    free(na);
}

const char *cw_na_plugin_name(const cw_na_t *na)
{
    return na ? na->plugin->name : NULL;
}

const char *cw_na_protocol(const cw_na_t *na)
{
    return na ? na->protocol : NULL;
}

const struct cw_na_caps *cw_na_caps(const cw_na_t *na)
{
    return na ? &na->caps : NULL;
}

/* ---- addresses ---- */

cw_status_t cw_na_addr_lookup(cw_na_t *na, const char *uri,
                              cw_na_addr_t **addr_p)
{
    struct cw_uri u;
    char err[256];
    cw_status_t st;

    if (na == NULL || uri == NULL || addr_p == NULL)
        return CW_INVALID_ARG;
    st = cw_uri_parse_err(uri, &u, err, sizeof(err));
    if (st != CW_OK) {
        CW_DEBUG("na", "%s", err);
        return st;
    }
    if (strcmp(u.plugin, na->plugin->name) != 0 ||
        strcmp(u.protocol, na->protocol) != 0) {
        CW_DEBUG("na", "%s cannot be reached from a %s instance", uri,
                 na->prefix);
        return CW_UNREACHABLE;
    }
    return na->ops->addr_lookup(na->cls, u.location, addr_p);
}

cw_status_t cw_na_addr_self(cw_na_t *na, cw_na_addr_t **addr_p)
{
    if (na == NULL || addr_p == NULL)
        return CW_INVALID_ARG;
    return na->ops->addr_self(na->cls, addr_p);
}

cw_status_t cw_na_addr_dup(cw_na_t *na, cw_na_addr_t *addr,
                           cw_na_addr_t **addr_p)
{
    if (na == NULL || addr == NULL || addr_p == NULL)
        return CW_INVALID_ARG;
    return na->ops->addr_dup(na->cls, addr, addr_p);
}

void cw_na_addr_free(cw_na_t *na, cw_na_addr_t *addr)
{
    if (na == NULL || addr == NULL)
        return;
    na->ops->addr_free(na->cls, addr);
}

bool cw_na_addr_cmp(cw_na_t *na, cw_na_addr_t *a, cw_na_addr_t *b)
{
    if (na == NULL || a == NULL || b == NULL)
        return false;
    return a == b || na->ops->addr_cmp(na->cls, a, b);
}

cw_status_t cw_na_addr_to_string(cw_na_t *na, cw_na_addr_t *addr, char *buf,
                                 size_t len)
{
    size_t rest;

    if (na == NULL || addr == NULL || buf == NULL || len == 0)
        return CW_INVALID_ARG;
    if (len <= na->prefix_len)
        return CW_OVERFLOW;
    memcpy(buf, na->prefix, na->prefix_len);
    rest = len - na->prefix_len;
    return na->ops->addr_to_string(na->cls, addr, buf + na->prefix_len, &rest);
}

size_t cw_na_addr_serialize_size(cw_na_t *na, cw_na_addr_t *addr)
{
    if (na == NULL || addr == NULL)
        return 0;
    return na->ops->addr_serialize_size(na->cls, addr);
}

cw_status_t cw_na_addr_serialize(cw_na_t *na, void *buf, size_t size,
                                 cw_na_addr_t *addr)
{
    if (na == NULL || buf == NULL || addr == NULL)
        return CW_INVALID_ARG;
    if (size < na->ops->addr_serialize_size(na->cls, addr))
        return CW_OVERFLOW;
    return na->ops->addr_serialize(na->cls, buf, size, addr);
}

cw_status_t cw_na_addr_deserialize(cw_na_t *na, const void *buf, size_t size,
                                   cw_na_addr_t **addr_p)
{
    if (na == NULL || buf == NULL || size == 0 || addr_p == NULL)
        return CW_INVALID_ARG;
    return na->ops->addr_deserialize(na->cls, buf, size, addr_p);
}

/* ---- messages ---- */

/* What every send checks before the plugin sees it (an inject, which has
 * no callback, passes inject_no_cb). */
static cw_status_t send_args_check(cw_na_t *na, const void *buf, size_t len,
                                   cw_na_addr_t *dest, uint32_t tag,
                                   cw_na_cb_t cb, bool expected)
{
    if (na == NULL || (buf == NULL && len > 0) || dest == NULL || cb == NULL)
        return CW_INVALID_ARG;
    if (len >
        (expected ? na->caps.max_expected_size : na->caps.max_unexpected_size))
        return CW_OVERFLOW;
    if (tag > na->caps.max_tag)
        return CW_INVALID_ARG;
    return CW_OK;
}

cw_status_t cw_na_msg_send_unexpected(cw_na_t *na, const void *buf, size_t len,
                                      cw_na_addr_t *dest, uint32_t tag,
                                      cw_na_cb_t cb, void *arg,
                                      cw_na_op_t **op_p)
{
    cw_status_t st = send_args_check(na, buf, len, dest, tag, cb, false);

    if (st != CW_OK)
        return st;
    return na->ops->msg_send_unexpected(na->cls, buf, len, dest, tag, cb, arg,
                                        op_p);
}

cw_status_t cw_na_msg_recv_unexpected(cw_na_t *na, void *buf, size_t len,
                                      cw_na_cb_t cb, void *arg,
                                      cw_na_op_t **op_p)
{
    if (na == NULL || buf == NULL || len == 0 || cb == NULL)
        return CW_INVALID_ARG;
    return na->ops->msg_recv_unexpected(na->cls, buf, len, cb, arg, op_p);
}

cw_status_t cw_na_msg_send_expected(cw_na_t *na, const void *buf, size_t len,
                                    cw_na_addr_t *dest, uint32_t tag,
                                    cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    cw_status_t st = send_args_check(na, buf, len, dest, tag, cb, true);

    if (st != CW_OK)
        return st;
    return na->ops->msg_send_expected(na->cls, buf, len, dest, tag, cb, arg,
                                      op_p);
}

static void inject_no_cb(const struct cw_na_cb_info *info)
{
    (void)info;
}

cw_status_t cw_na_msg_inject(cw_na_t *na, const void *buf, size_t len,
                             cw_na_addr_t *dest, uint32_t tag, bool expected)
{
    cw_status_t st =
        send_args_check(na, buf, len, dest, tag, inject_no_cb, expected);

    if (st != CW_OK)
        return st;
    if (na->ops->msg_inject == NULL)
        return CW_AGAIN;
    return na->ops->msg_inject(na->cls, buf, len, dest, tag, expected);
}

cw_status_t cw_na_msg_recv_expected(cw_na_t *na, void *buf, size_t len,
                                    cw_na_addr_t *source, uint32_t tag,
                                    cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    if (na == NULL || (buf == NULL && len > 0) || source == NULL || cb == NULL)
        return CW_INVALID_ARG;
    if (tag > na->caps.max_tag)
        return CW_INVALID_ARG;
    return na->ops->msg_recv_expected(na->cls, buf, len, source, tag, cb, arg,
                                      op_p);
}

/* ---- memory and RMA ---- */

cw_status_t cw_na_mem_register(cw_na_t *na, const struct cw_na_segment *segs,
                               size_t n, uint32_t access, cw_na_mem_t **mem_p)
{
    if (na == NULL || segs == NULL || n == 0 || mem_p == NULL ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)) != 0)
        return CW_INVALID_ARG;
    if (na->ops->mem_register == NULL)
        return CW_UNSUPPORTED;
    if (na->caps.max_segments && n > na->caps.max_segments)
        return CW_OVERFLOW;
    for (size_t i = 0; i < n; i++)
        if (segs[i].base == NULL && segs[i].len > 0)
            return CW_INVALID_ARG;
    return na->ops->mem_register(na->cls, segs, n, access, mem_p);
}

void cw_na_mem_release(cw_na_t *na, cw_na_mem_t *mem)
{
    if (na == NULL || mem == NULL || na->ops->mem_release == NULL)
        return;
    na->ops->mem_release(na->cls, mem);
}

size_t cw_na_mem_serialize_size(cw_na_t *na, cw_na_mem_t *mem)
{
    if (na == NULL || mem == NULL || na->ops->mem_serialize_size == NULL)
        return 0;
    return na->ops->mem_serialize_size(na->cls, mem);
}

cw_status_t cw_na_mem_serialize(cw_na_t *na, void *buf, size_t size,
                                cw_na_mem_t *mem)
{
    if (na == NULL || buf == NULL || mem == NULL)
        return CW_INVALID_ARG;
    if (na->ops->mem_serialize == NULL)
        return CW_UNSUPPORTED;
    if (size < na->ops->mem_serialize_size(na->cls, mem))
        return CW_OVERFLOW;
    return na->ops->mem_serialize(na->cls, buf, size, mem);
}

cw_status_t cw_na_mem_deserialize(cw_na_t *na, const void *buf, size_t size,
                                  cw_na_mem_t **mem_p)
{
    if (na == NULL || buf == NULL || size == 0 || mem_p == NULL)
        return CW_INVALID_ARG;
    if (na->ops->mem_deserialize == NULL)
        return CW_UNSUPPORTED;
    return na->ops->mem_deserialize(na->cls, buf, size, mem_p);
}

uint64_t cw_na_dropped(cw_na_t *na)
{
    if (na == NULL || na->ops->dropped == NULL)
        return 0;
    return na->ops->dropped(na->cls);
}

cw_status_t cw_na_mem_restrict(cw_na_t *na, cw_na_mem_t *mem, size_t off,
                               size_t len, uint32_t access, cw_na_mem_t **mem_p)
{
    if (na == NULL || mem == NULL || len == 0 || mem_p == NULL || access == 0 ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)) != 0)
        return CW_INVALID_ARG;
    if (na->ops->mem_restrict == NULL)
        return CW_UNSUPPORTED;
    return na->ops->mem_restrict(na->cls, mem, off, len, access, mem_p);
}

/* put and get check the same arguments and differ only in the op called. */
static cw_status_t na_rma(cw_na_t *na, bool is_put, cw_na_mem_t *local,
                          size_t local_off, cw_na_mem_t *remote,
                          size_t remote_off, size_t len, cw_na_addr_t *peer,
                          cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    if (na == NULL || local == NULL || remote == NULL || peer == NULL ||
        cb == NULL)
        return CW_INVALID_ARG;
    cw_status_t (*op)(cw_na_class_t *, cw_na_mem_t *, size_t, cw_na_mem_t *,
                      size_t, size_t, cw_na_addr_t *, cw_na_cb_t, void *,
                      cw_na_op_t **) = is_put ? na->ops->put : na->ops->get;
    if (op == NULL)
        return CW_UNSUPPORTED;
    return op(na->cls, local, local_off, remote, remote_off, len, peer, cb, arg,
              op_p);
}

cw_status_t cw_na_put(cw_na_t *na, cw_na_mem_t *local, size_t local_off,
                      cw_na_mem_t *remote, size_t remote_off, size_t len,
                      cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                      cw_na_op_t **op_p)
{
    return na_rma(na, true, local, local_off, remote, remote_off, len, peer, cb,
                  arg, op_p);
}

cw_status_t cw_na_get(cw_na_t *na, cw_na_mem_t *local, size_t local_off,
                      cw_na_mem_t *remote, size_t remote_off, size_t len,
                      cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                      cw_na_op_t **op_p)
{
    return na_rma(na, false, local, local_off, remote, remote_off, len, peer,
                  cb, arg, op_p);
}

/* ---- progress ---- */

int cw_na_get_wait_fd(cw_na_t *na)
{
    if (na == NULL || na->ops->get_wait_fd == NULL || (na->flags & CW_NA_BUSY))
        return -1;
    return na->ops->get_wait_fd(na->cls);
}

bool cw_na_safe_to_sleep(cw_na_t *na)
{
    if (na == NULL || na->ops->safe_to_sleep == NULL ||
        (na->flags & CW_NA_BUSY))
        return false;
    return na->ops->safe_to_sleep(na->cls);
}

bool cw_na_streaming(cw_na_t *na)
{
    return na != NULL && na->ops->streaming != NULL &&
           na->ops->streaming(na->cls);
}

cw_status_t cw_na_progress(cw_na_t *na, unsigned max, unsigned *count_p)
{
    unsigned count = 0;
    cw_status_t st;

    if (na == NULL)
        return CW_INVALID_ARG;
    st = na->ops->progress(na->cls, max, &count);
    if (count_p)
        *count_p = count;
    return st;
}

cw_status_t cw_na_progress_wait(cw_na_t *na, unsigned timeout_ms,
                                unsigned *count_p)
{
    uint64_t start = cw_now_ns();
    uint64_t deadline = start + (uint64_t)timeout_ms * 1000000ull;
    unsigned total = 0;
    int fd;

    if (na == NULL)
        return CW_INVALID_ARG;
    fd = cw_na_get_wait_fd(na);
    for (;;) {
        unsigned n = 0;
        uint64_t now;
        cw_status_t st = na->ops->progress(na->cls, 0, &n);

        if (st != CW_OK)
            return st;
        total += n;
        if (total > 0)
            break;
        now = cw_now_ns();
        if (now >= deadline)
            break;
        if ((na->flags & CW_NA_BUSY) || now - start < NA_SPIN_NS)
            continue;
        if (fd >= 0 && cw_na_safe_to_sleep(na)) {
            /* Bounded: the wait fd is a hint, never trusted alone. */
            uint64_t left_ms = (deadline - now + 999999ull) / 1000000ull;
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int ms =
                left_ms < NA_WAIT_SLICE_MS ? (int)left_ms : NA_WAIT_SLICE_MS;
            if (poll(&pfd, 1, ms) < 0 && errno != EINTR) {
                CW_ERROR("na", "poll() on the %s wait fd failed: %s",
                         na->prefix, strerror(errno));
                return CW_IO;
            }
        } else if (fd < 0) {
            /* No wait object: yield the core instead of burning it. */
            sched_yield();
        }
    }
    if (count_p)
        *count_p = total;
    return total > 0 ? CW_OK : CW_TIMEOUT;
}

cw_status_t cw_na_cancel(cw_na_t *na, cw_na_op_t *op)
{
    if (na == NULL || op == NULL)
        return CW_INVALID_ARG;
    return na->ops->cancel(na->cls, op);
}
