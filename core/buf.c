/*
 * Argument encoding: little-endian fixed-size integers, length-prefixed
 * strings and byte strings, bulk handles as indices into the descriptor
 * section.  Every read is checked against the end of the buffer; the first
 * error sticks, so a handler may decode everything and check once.
 */
#include "rpc_priv.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#define CW_STR_ABSENT 0u /* a present string carries its NUL: length >= 1 */

void cw_buf_init_writer(cw_buf_t *b, size_t head)
{
    memset(b, 0, sizeof(*b));
    b->writer = true;
    b->head = head;
}

void cw_buf_init_reader_slow(cw_buf_t *b, const void *data, size_t len)
{
    cw_handle_t *h = b->h;
    bool standalone = b->standalone;

    cw_buf_fini(b);
    memset(b, 0, sizeof(*b));
    b->data = (uint8_t *)data;
    b->len = len;
    b->h = h;
    b->standalone = standalone;
}

/* The bulk handles' context lock held (cw_bulk_unref says so). */
static void buf_drop_bulks(cw_buf_t *b)
{
    for (unsigned i = 0; i < b->nbulk; i++)
        cw_bulk_unref(b->bulks[i]);
    b->nbulk = 0;
}

void cw_buf_reset(cw_buf_t *b)
{
    buf_drop_bulks(b);
    b->len = 0;
    b->pos = 0;
    b->err = CW_OK;
}

void cw_buf_trim(cw_buf_t *b, size_t keep)
{
    if (b->writer && b->cap > keep) {
        free(b->alloc);
        b->alloc = NULL;
        b->data = NULL;
        b->cap = 0;
        b->len = 0;
    }
}

void cw_buf_fini(cw_buf_t *b)
{
    buf_drop_bulks(b);
    free(b->bulks);
    b->bulks = NULL;
    b->bulk_cap = 0;
    if (b->writer) {
        free(b->alloc);
        b->alloc = NULL;
        b->data = NULL;
        b->cap = 0;
        b->len = 0;
    }
}

cw_status_t cw_buf_reserve(cw_buf_t *b, size_t need)
{
    size_t ncap;
    uint8_t *p;

    if (!b->writer)
        return CW_INVALID_ARG;
    if (need <= b->cap - b->len)
        return CW_OK;
    if (need > SIZE_MAX / 2 - b->len - b->head)
        return CW_OVERFLOW;
    ncap = b->cap ? b->cap : 256;
    while (ncap - b->len < need)
        ncap *= 2;
    p = realloc(b->alloc, b->head + ncap);
    if (p == NULL)
        return CW_NOMEM;
    b->alloc = p;
    b->data = p + b->head;
    b->cap = ncap;
    return CW_OK;
}

static cw_status_t buf_put(cw_buf_t *b, const void *p, size_t n)
{
    cw_status_t st;

    if (b == NULL)
        return CW_INVALID_ARG;
    if (b->err != CW_OK)
        return b->err;
    if (!b->writer)
        return b->err = CW_INVALID_ARG;
    st = cw_buf_reserve(b, n);
    if (st != CW_OK)
        return b->err = st;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return CW_OK;
}

static cw_status_t buf_get(cw_buf_t *b, void *p, size_t n)
{
    if (b == NULL)
        return CW_INVALID_ARG;
    if (b->err != CW_OK)
        return b->err;
    if (b->writer)
        return b->err = CW_INVALID_ARG;
    if (n > b->len - b->pos)
        return b->err = CW_RANGE;
    memcpy(p, b->data + b->pos, n);
    b->pos += n;
    return CW_OK;
}

cw_status_t cw_buf_put_u8(cw_buf_t *b, uint8_t v)
{
    return buf_put(b, &v, 1);
}

cw_status_t cw_buf_put_u16(cw_buf_t *b, uint16_t v)
{
    v = htole16(v);
    return buf_put(b, &v, 2);
}

cw_status_t cw_buf_put_u32(cw_buf_t *b, uint32_t v)
{
    v = htole32(v);
    return buf_put(b, &v, 4);
}

cw_status_t cw_buf_put_u64(cw_buf_t *b, uint64_t v)
{
    v = htole64(v);
    return buf_put(b, &v, 8);
}

cw_status_t cw_buf_put_i64(cw_buf_t *b, int64_t v)
{
    return cw_buf_put_u64(b, (uint64_t)v);
}

cw_status_t cw_buf_put_bytes(cw_buf_t *b, const void *p, size_t len)
{
    cw_status_t st;

    if (b != NULL && b->err == CW_OK &&
        (len > UINT32_MAX || (p == NULL && len > 0)))
        return b->err = CW_INVALID_ARG;
    st = cw_buf_put_u32(b, (uint32_t)len);
    if (st != CW_OK)
        return st;
    return buf_put(b, p, len);
}

cw_status_t cw_buf_put_str(cw_buf_t *b, const char *s)
{
    size_t n;
    cw_status_t st;

    if (s == NULL)
        return cw_buf_put_u32(b, CW_STR_ABSENT);
    n = strlen(s) + 1;
    if (n > UINT32_MAX) {
        if (b != NULL && b->err == CW_OK)
            b->err = CW_INVALID_ARG;
        return CW_INVALID_ARG;
    }
    st = cw_buf_put_u32(b, (uint32_t)n);
    if (st != CW_OK)
        return st;
    return buf_put(b, s, n);
}

cw_status_t cw_buf_put_bulk(cw_buf_t *b, cw_bulk_t *bulk)
{
    cw_status_t st;

    if (b == NULL)
        return CW_INVALID_ARG;
    if (b->err != CW_OK)
        return b->err;
    if (!b->writer || bulk == NULL)
        return b->err = CW_INVALID_ARG;
    if (b->nbulk >= CW_MAX_DESC)
        return b->err = CW_OVERFLOW;
    if (b->nbulk == b->bulk_cap) {
        unsigned ncap = b->bulk_cap ? b->bulk_cap * 2 : 4;
        cw_bulk_t **nb = realloc(b->bulks, ncap * sizeof(*nb));
        if (nb == NULL)
            return b->err = CW_NOMEM;
        b->bulks = nb;
        b->bulk_cap = ncap;
    }
    st = cw_buf_put_u32(b, b->nbulk);
    if (st != CW_OK)
        return st;
    atomic_fetch_add(&bulk->refs, 1);
    b->bulks[b->nbulk++] = bulk;
    return CW_OK;
}

cw_status_t cw_buf_copy_bulks(cw_buf_t *dst, const cw_buf_t *src)
{
    if (src->nbulk == 0)
        return CW_OK;
    dst->bulks = malloc(src->nbulk * sizeof(*dst->bulks));
    if (dst->bulks == NULL)
        return CW_NOMEM;
    dst->bulk_cap = src->nbulk;
    for (unsigned i = 0; i < src->nbulk; i++) {
        atomic_fetch_add(&src->bulks[i]->refs, 1);
        dst->bulks[i] = src->bulks[i];
    }
    dst->nbulk = src->nbulk;
    return CW_OK;
}

cw_status_t cw_buf_get_u8(cw_buf_t *b, uint8_t *v_p)
{
    uint8_t v;
    cw_status_t st = buf_get(b, &v, 1);
    if (st == CW_OK && v_p)
        *v_p = v;
    return st;
}

cw_status_t cw_buf_get_u16(cw_buf_t *b, uint16_t *v_p)
{
    uint16_t v;
    cw_status_t st = buf_get(b, &v, 2);
    if (st == CW_OK && v_p)
        *v_p = le16toh(v);
    return st;
}

cw_status_t cw_buf_get_u32(cw_buf_t *b, uint32_t *v_p)
{
    uint32_t v;
    cw_status_t st = buf_get(b, &v, 4);
    if (st == CW_OK && v_p)
        *v_p = le32toh(v);
    return st;
}

cw_status_t cw_buf_get_u64(cw_buf_t *b, uint64_t *v_p)
{
    uint64_t v;
    cw_status_t st = buf_get(b, &v, 8);
    if (st == CW_OK && v_p)
        *v_p = le64toh(v);
    return st;
}

cw_status_t cw_buf_get_i64(cw_buf_t *b, int64_t *v_p)
{
    uint64_t v;
    cw_status_t st = cw_buf_get_u64(b, &v);
    if (st == CW_OK && v_p)
        *v_p = (int64_t)v;
    return st;
}

/* Length-prefixed view; the prefix is consumed only if the body fits. */
static cw_status_t buf_get_view(cw_buf_t *b, const uint8_t **p_p, size_t *len_p)
{
    uint32_t n;
    size_t save;
    cw_status_t st;

    if (b == NULL)
        return CW_INVALID_ARG;
    save = b->pos;
    st = cw_buf_get_u32(b, &n);
    if (st != CW_OK)
        return st;
    if (n > b->len - b->pos) {
        b->pos = save;
        return b->err = CW_RANGE;
    }
    *p_p = b->data + b->pos;
    *len_p = n;
    b->pos += n;
    return CW_OK;
}

cw_status_t cw_buf_get_bytes(cw_buf_t *b, const void **p_p, size_t *len_p)
{
    const uint8_t *p;
    size_t n;
    cw_status_t st = buf_get_view(b, &p, &n);

    if (st != CW_OK)
        return st;
    if (p_p)
        *p_p = p;
    if (len_p)
        *len_p = n;
    return CW_OK;
}

cw_status_t cw_buf_get_str(cw_buf_t *b, const char **s_p)
{
    const uint8_t *p;
    size_t n;
    cw_status_t st = buf_get_view(b, &p, &n);

    if (st != CW_OK)
        return st;
    if (n == CW_STR_ABSENT) {
        if (s_p)
            *s_p = NULL;
        return CW_OK;
    }
    if (p[n - 1] != '\0' || memchr(p, '\0', n - 1) != NULL) {
        b->pos -= n + 4;
        return b->err = CW_PROTOCOL;
    }
    if (s_p)
        *s_p = (const char *)p;
    return CW_OK;
}

cw_status_t cw_buf_get_bulk(cw_buf_t *b, cw_bulk_t **bulk_p)
{
    uint32_t idx;
    cw_status_t st;

    if (b == NULL || bulk_p == NULL)
        return CW_INVALID_ARG;
    st = cw_buf_get_u32(b, &idx);
    if (st != CW_OK)
        return st;
    /* Self RPC: the descriptor list is the caller's bulk handles. */
    if (b->nbulk > 0 || b->desc == NULL) {
        if (idx >= b->nbulk)
            return b->err = CW_RANGE;
        atomic_fetch_add(&b->bulks[idx]->refs, 1);
        *bulk_p = b->bulks[idx];
        return CW_OK;
    }
    if (idx >= b->ndesc || b->h == NULL)
        return b->err = CW_RANGE;
    {
        struct cw_wire_desc d;
        cw_context_t *ctx = b->h->ctx;
        const uint8_t *desc = b->desc;
        size_t desc_len = b->desc_len;
        cw_bulk_t *bulk;

        cw_lock_take(&ctx->lock);
        /* A server's: the last RESUME's tokens, if one came. */
        if (b->h->use.role == CW_H_SERVER)
            desc = cw_rs_desc(b->h, b, &desc_len);
        st = cw_wire_desc_get(desc, desc_len, b->ndesc, idx, &d, NULL, NULL);
        if (st == CW_OK)
            st = cw_bulk_from_desc(ctx, b->h->use.net, &d, &bulk);
        if (st == CW_OK && b->h->use.role == CW_H_SERVER)
            cw_rs_bulk_join(b->h, bulk, idx);
        cw_lock_give(&ctx->lock);
        if (st != CW_OK)
            return b->err = st;
        *bulk_p = bulk;
    }
    return CW_OK;
}

cw_status_t cw_buf_error(const cw_buf_t *b)
{
    return b ? b->err : CW_INVALID_ARG;
}

size_t cw_buf_len(const cw_buf_t *b)
{
    return b ? b->len : 0;
}

size_t cw_buf_remaining(const cw_buf_t *b)
{
    return (b && !b->writer) ? b->len - b->pos : 0;
}

cw_status_t cw_buf_create_reader(const void *data, size_t len, cw_buf_t **b_p)
{
    cw_buf_t *b;

    if (b_p == NULL || (data == NULL && len > 0))
        return CW_INVALID_ARG;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return CW_NOMEM;
    b->data = (uint8_t *)data;
    b->len = len;
    b->standalone = true;
    *b_p = b;
    return CW_OK;
}

cw_status_t cw_buf_create_writer(size_t initial, cw_buf_t **b_p)
{
    cw_buf_t *b;

    if (b_p == NULL)
        return CW_INVALID_ARG;
    b = malloc(sizeof(*b));
    if (b == NULL)
        return CW_NOMEM;
    cw_buf_init_writer(b, 0);
    b->standalone = true;
    if (initial > 0 && cw_buf_reserve(b, initial) != CW_OK) {
        free(b);
        return CW_NOMEM;
    }
    *b_p = b;
    return CW_OK;
}

const void *cw_buf_data(const cw_buf_t *b)
{
    return b ? b->data : NULL;
}

void cw_buf_destroy(cw_buf_t *b)
{
    if (b == NULL)
        return;
    /* The application's: no lock held. */
    for (unsigned i = 0; i < b->nbulk; i++)
        cw_bulk_free(b->bulks[i]);
    b->nbulk = 0;
    cw_buf_fini(b);
    if (b->standalone)
        free(b);
}
