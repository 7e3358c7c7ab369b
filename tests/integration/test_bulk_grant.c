/*
 * Zero-staging grants are not trusted blindly by the target
 * (docs/bulk-gateway.md, "Zero-staging").  One process, three na-shm
 * endpoints: the origin exposes a region; a fake gateway answers the
 * target's delegation with a grant chosen by the case; the target
 * transfers on a proxy handle.  An honest grant moves the bytes (pull and
 * push, checked); a grant of another length, a wider right, a handle
 * smaller than it claims, a handle without the right, an owner on another
 * plugin, an expired or malformed grant fails the transfer with its
 * status and moves nothing.  A cancel before the grant and one during the
 * granted transfer end it with CW_CANCELED.  Every transfer completes
 * exactly once; one whose delegation cannot be sent fails at once and
 * does not hand out its operation.
 *
 * The endpoints are named cwgrant<pid>-{or,gw,tg}.
 */
#include "../../core/bulk_proxy.h"
#include "../../core/rpc_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEN 65536u
#define BIG (16u << 20) /* sixteen 1 MiB chunks: a transfer that lasts */

enum cancel {
    C_NONE,
    C_EARLY,  /* cancel before the gateway answers */
    C_DIRECT, /* cancel while the granted transfer runs */
};

enum gcase {
    G_HONEST,
    G_LONGER,    /* claims more bytes than asked */
    G_WIDER,     /* read-write where read was asked */
    G_SHORT_MEM, /* the handle covers less than it claims */
    G_NO_ACCESS, /* the handle lacks the right the grant names */
    G_OTHER_PLUGIN,
    G_EXPIRED,
    G_GARBAGE,
    G_TRAILING, /* a valid grant followed by extra bytes */
};

static const char *const case_names[] = {
    "honest grant",
    "grant longer than asked",
    "wider permission than asked",
    "handle shorter than the grant",
    "handle without the granted right",
    "owner on another plugin",
    "expired grant",
    "malformed grant",
    "grant with trailing bytes",
};

struct env {
    cw_context_t *octx, *gctx, *tctx;
    cw_network_t *onet, *gnet, *tnet;
    char oaddr[CW_URI_MAX];
    cw_bulk_t *obulk; /* the origin's region */
    uint8_t *obuf;
    enum gcase gc;
    unsigned asked; /* delegations seen asking for a grant */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The origin's region as a serialized remote handle restricted to
 * [off, off + len) with @p access, as a gateway would grant it. */
static cw_status_t make_mem(struct env *e, size_t off, size_t len,
                            uint32_t access, uint8_t *buf, size_t *len_p)
{
    cw_na_mem_t *lm, *rm = NULL, *sub = NULL;
    uint8_t tmp[256];
    size_t n;
    cw_status_t st;

    cw_lock_take(&e->octx->lock);
    st = cw_bulk_reg(e->obulk, e->onet, &lm);
    n = st == CW_OK ? cw_na_mem_serialize_size(e->onet->na, lm) : 0;
    if (st == CW_OK)
        st = n <= sizeof(tmp) ? cw_na_mem_serialize(e->onet->na, tmp, n, lm)
                              : CW_OVERFLOW;
    cw_lock_give(&e->octx->lock);
    if (st != CW_OK)
        return st;
    cw_lock_take(&e->gctx->lock);
    st = cw_na_mem_deserialize(e->gnet->na, tmp, n, &rm);
    if (st == CW_OK)
        st = cw_na_mem_restrict(e->gnet->na, rm, off, len, access, &sub);
    if (st == CW_OK) {
        n = cw_na_mem_serialize_size(e->gnet->na, sub);
        st = n <= 256 ? cw_na_mem_serialize(e->gnet->na, buf, n, sub)
                      : CW_OVERFLOW;
    }
    cw_na_mem_release(e->gnet->na, sub);
    cw_na_mem_release(e->gnet->na, rm);
    cw_lock_give(&e->gctx->lock);
    if (st == CW_OK)
        *len_p = n;
    return st;
}

/* The fake gateway: answer every delegation with the case's grant. */
static void h_deleg(cw_handle_t *h, void *arg)
{
    struct env *e = arg;
    struct cw_bproxy_req r;
    cw_buf_t *out = cw_handle_output(h);
    uint32_t want = 0, perm, access;
    uint8_t mem[256];
    size_t mlen = 0, mlen_grant;
    uint64_t len, life = 5000;
    const char *owner = e->oaddr;
    cw_status_t st = cw_bproxy_req_decode(h, &r);

    if (st != CW_OK)
        goto answer;
    if (r.flags & CW_BPROXY_DIRECT)
        e->asked++;
    want = r.dir == CW_BULK_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY;
    access = r.dir == CW_BULK_PULL ? CW_NA_MEM_READ : CW_NA_MEM_WRITE;
    perm = want;
    len = r.len;
    mlen_grant = r.len;
    switch (e->gc) {
    case G_LONGER:
        len = r.len + 1;
        break;
    case G_WIDER:
        perm = CW_BULK_READ_WRITE;
        access = CW_NA_MEM_READ | CW_NA_MEM_WRITE;
        break;
    case G_SHORT_MEM:
        mlen_grant = r.len - 1;
        break;
    case G_NO_ACCESS:
        access = r.dir == CW_BULK_PULL ? CW_NA_MEM_WRITE : CW_NA_MEM_READ;
        break;
    case G_OTHER_PLUGIN:
        owner = "ofi+tcp://127.0.0.1:9";
        break;
    case G_EXPIRED:
        life = 0;
        break;
    case G_GARBAGE:
        cw_buf_put_u8(out, 7);
        cw_buf_put_u64(out, r.len);
        goto answer;
    default:
        break;
    }
    st = make_mem(e, r.off, mlen_grant, access, mem, &mlen);
    if (st != CW_OK)
        goto answer;
    cw_buf_put_u8(out, CW_BPROXY_GRANT);
    cw_buf_put_str(out, owner);
    cw_buf_put_u8(out, (uint8_t)perm);
    cw_buf_put_u64(out, len);
    cw_buf_put_u64(out, life);
    cw_buf_put_bytes(out, mem, mlen);
    if (e->gc == G_TRAILING)
        cw_buf_put_u32(out, 0);
answer:
    cw_bulk_free(r.bulk);
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

struct done {
    unsigned calls;
    cw_status_t st;
};

static void xfer_cb(cw_status_t st, void *arg)
{
    struct done *d = arg;

    d->calls++;
    d->st = st;
}

static void progress_all(struct env *e, unsigned ms)
{
    uint64_t end = now_ms() + ms;

    do {
        cw_context_t *c[3] = {e->octx, e->gctx, e->tctx};
        for (int i = 0; i < 3; i++) {
            cw_progress(c[i], 0);
            cw_trigger(c[i], 0, 0, NULL);
        }
    } while (now_ms() < end);
}

/* One transfer on a proxy handle at the target; returns its status (or
 * CW_INTERNAL if it did not complete exactly once). */
/* One step of every context; true if @p dn completed. */
static bool step_all(struct env *e, const struct done *dn)
{
    cw_context_t *c[3] = {e->octx, e->gctx, e->tctx};

    for (int i = 0; i < 3; i++) {
        cw_progress(c[i], 0);
        cw_trigger(c[i], 0, 0, NULL);
    }
    return dn->calls > 0;
}

/* One transfer of @p len bytes on a proxy handle at the target, into
 * @p nseg segments of @p tbuf, cancelled as @p cancel says; returns its
 * status (or CW_INTERNAL if it did not complete exactly once, the cancel
 * found nothing to cancel, or a transfer that failed to start wrote its
 * operation). */
static cw_status_t one_len(struct env *e, enum cw_bulk_dir dir, uint8_t *tbuf,
                           size_t len, size_t nseg, enum cancel cancel)
{
    uint8_t desc[64], tok[CW_BPROXY_TOKEN_LEN];
    struct cw_wire_desc d;
    struct done dn = {0};
    struct cw_segment *seg = calloc(nseg, sizeof(*seg));
    cw_bulk_t *pb = NULL, *lb = NULL;
    cw_bulk_op_t *op = NULL;
    cw_addr_t *gw = NULL;
    char gaddr[CW_URI_MAX];
    bool canceled = false;
    size_t dlen;
    uint64_t end;
    cw_status_t st;

    if (seg == NULL)
        return CW_NOMEM;
    for (size_t i = 0; i < nseg; i++) {
        seg[i].base = tbuf + i * (len / nseg);
        seg[i].len = i + 1 < nseg ? len / nseg : len - i * (len / nseg);
    }
    memset(tok, 0x5a, sizeof(tok));
    st = cw_bproxy_desc_encode(e->tnet, tok, CW_BULK_READ_WRITE, len, 10000,
                               desc, sizeof(desc), &dlen);
    if (st == CW_OK)
        st = cw_wire_desc_get(desc, dlen, 1, 0, &d, NULL, NULL);
    if (st == CW_OK) {
        cw_lock_take(&e->tctx->lock);
        st = cw_bulk_from_desc(e->tctx, e->tnet, &d, &pb);
        cw_lock_give(&e->tctx->lock);
    }
    if (st == CW_OK)
        st = cw_bulk_create(e->tctx, seg, nseg, CW_BULK_READ_WRITE, &lb);
    if (st == CW_OK)
        st = cw_network_uri(e->gnet, gaddr, sizeof(gaddr));
    if (st == CW_OK)
        st = cw_addr_lookup(e->tctx, gaddr, &gw);
    if (st == CW_OK)
        st = cw_bulk_transfer(e->tctx, dir, gw, pb, 0, lb, 0, len, xfer_cb, &dn,
                              &op);
    if (st != CW_OK && op != NULL)
        st = CW_INTERNAL; /* written on failure: a dangling operation */
    if (st == CW_OK && cancel == C_EARLY)
        canceled = cw_bulk_cancel(op) == CW_OK;
    end = now_ms() + 10000;
    while (st == CW_OK && now_ms() < end && !step_all(e, &dn)) {
        bool granted;
        if (cancel != C_DIRECT || canceled)
            continue;
        cw_lock_take(&e->tctx->lock);
        granted = op->direct_op != NULL;
        cw_lock_give(&e->tctx->lock);
        if (granted)
            canceled = cw_bulk_cancel(op) == CW_OK;
    }
    if (st == CW_OK) {
        progress_all(e, 20); /* a second completion would show here */
        st = dn.calls == 1 && (cancel == C_NONE || canceled) ? dn.st
                                                             : CW_INTERNAL;
    }
    cw_addr_free(gw);
    cw_bulk_free(lb);
    cw_bulk_free(pb);
    free(seg);
    return st;
}

static cw_status_t one(struct env *e, enum cw_bulk_dir dir, uint8_t *tbuf)
{
    return one_len(e, dir, tbuf, LEN, 1, C_NONE);
}

static int check(const char *what, cw_status_t got, cw_status_t want)
{
    printf("%s - %s: %s", got == want ? "ok" : "not ok", what,
           cw_status_name(got));
    if (got != want)
        printf(", expected %s", cw_status_name(want));
    printf("\n");
    return got == want ? 0 : 1;
}

static bool all(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

int main(void)
{
    static const cw_status_t expect[] = {
        [G_HONEST] = CW_OK,
        [G_LONGER] = CW_PROTOCOL,
        [G_WIDER] = CW_PROTOCOL,
        [G_SHORT_MEM] = CW_RANGE,
        [G_NO_ACCESS] = CW_PERMISSION,
        [G_OTHER_PLUGIN] = CW_UNREACHABLE,
        [G_EXPIRED] = CW_EXPIRED,
        [G_GARBAGE] = CW_PROTOCOL,
        [G_TRAILING] = CW_PROTOCOL,
    };
    struct env e;
    struct cw_segment oseg;
    char uri[CW_URI_MAX], pfx[32];
    uint8_t *tbuf;
    int fails = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(pfx, sizeof(pfx), "cwgrant%d", (int)getpid());
    memset(&e, 0, sizeof(e));
    e.obuf = malloc(BIG);
    tbuf = malloc(BIG);
    if (e.obuf == NULL || tbuf == NULL)
        return 2;
    oseg.base = e.obuf;
    oseg.len = BIG;
    if (cw_context_create(NULL, &e.octx) != CW_OK ||
        cw_context_create(NULL, &e.gctx) != CW_OK ||
        cw_context_create(NULL, &e.tctx) != CW_OK)
        return 2;
    snprintf(uri, sizeof(uri), "shm://%s-or", pfx);
    if (cw_network_open(e.octx, uri, CW_NET_LISTEN, &e.onet) != CW_OK)
        return 2;
    snprintf(uri, sizeof(uri), "shm://%s-gw", pfx);
    if (cw_network_open(e.gctx, uri, CW_NET_LISTEN, &e.gnet) != CW_OK)
        return 2;
    snprintf(uri, sizeof(uri), "shm://%s-tg", pfx);
    if (cw_network_open(e.tctx, uri, CW_NET_LISTEN, &e.tnet) != CW_OK ||
        cw_network_uri(e.onet, e.oaddr, sizeof(e.oaddr)) != CW_OK ||
        cw_rpc_register(e.gctx, CW_BPROXY_RPC, h_deleg, &e, NULL, NULL) !=
            CW_OK ||
        cw_bulk_create(e.octx, &oseg, 1, CW_BULK_READ_WRITE, &e.obulk) != CW_OK)
        return 2;

    /* Honest grants move the bytes both ways. */
    memset(e.obuf, 0xa1, LEN);
    memset(tbuf, 0, LEN);
    e.gc = G_HONEST;
    fails +=
        check("pull on an honest grant", one(&e, CW_BULK_PULL, tbuf), CW_OK);
    fails += check("pulled bytes", all(tbuf, LEN, 0xa1) ? CW_OK : CW_IO, CW_OK);
    memset(tbuf, 0xb2, LEN);
    fails +=
        check("push on an honest grant", one(&e, CW_BULK_PUSH, tbuf), CW_OK);
    fails +=
        check("pushed bytes", all(e.obuf, LEN, 0xb2) ? CW_OK : CW_IO, CW_OK);

    /* Bad grants: refused, nothing moves. */
    for (int c = G_LONGER; c <= G_TRAILING; c++) {
        char what[96];
        e.gc = (enum gcase)c;
        memset(e.obuf, 0xc3, LEN);
        memset(tbuf, 0, LEN);
        snprintf(what, sizeof(what), "pull, %s", case_names[c]);
        fails += check(what, one(&e, CW_BULK_PULL, tbuf), expect[c]);
        fails +=
            check("  nothing pulled", all(tbuf, LEN, 0) ? CW_OK : CW_IO, CW_OK);
        memset(tbuf, 0xd4, LEN);
        snprintf(what, sizeof(what), "push, %s", case_names[c]);
        fails += check(what, one(&e, CW_BULK_PUSH, tbuf), expect[c]);
        fails += check("  nothing pushed",
                       all(e.obuf, LEN, 0xc3) ? CW_OK : CW_IO, CW_OK);
    }
    fails += check("every delegation asked for a grant",
                   e.asked == 2 + 2 * (G_TRAILING - G_LONGER + 1) ? CW_OK
                                                                  : CW_INTERNAL,
                   CW_OK);
    /* Cancel before the answer and during the granted transfer: once,
     * CW_CANCELED. */
    e.gc = G_HONEST;
    fails +=
        check("cancel before the grant",
              one_len(&e, CW_BULK_PULL, tbuf, BIG, 1, C_EARLY), CW_CANCELED);
    fails +=
        check("cancel during a granted pull",
              one_len(&e, CW_BULK_PULL, tbuf, BIG, 1, C_DIRECT), CW_CANCELED);
    fails +=
        check("cancel during a granted push",
              one_len(&e, CW_BULK_PUSH, tbuf, BIG, 1, C_DIRECT), CW_CANCELED);
    memset(e.obuf, 0xe5, BIG);
    fails += check("a 16 MiB pull on a grant after the cancels",
                   one_len(&e, CW_BULK_PULL, tbuf, BIG, 1, C_NONE), CW_OK);
    fails +=
        check("pulled 16 MiB", all(tbuf, BIG, 0xe5) ? CW_OK : CW_IO, CW_OK);
    /* A delegation that cannot be sent (its descriptor of 1000 segments
     * exceeds the eager limit) fails the transfer at once, without
     * handing out the operation it freed. */
    fails +=
        check("a delegation too large to send",
              one_len(&e, CW_BULK_PULL, tbuf, LEN, 1000, C_NONE), CW_OVERFLOW);
    cw_bulk_free(e.obulk);
    cw_context_destroy(e.tctx);
    cw_context_destroy(e.gctx);
    cw_context_destroy(e.octx);
    free(e.obuf);
    free(tbuf);
    return fails ? 1 : 0;
}
