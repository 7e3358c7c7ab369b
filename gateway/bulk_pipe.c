/*
 * The delegation service (design §4): a target transferring on a proxy
 * handle sends causeway.bulk.proxy here; the token is checked and the
 * bytes are moved chunk by chunk through the staging pool: chunk k is
 * fetched from the source side while chunk k-1 is written to the
 * destination side, up to buffers.depth chunks per transfer.  Either side
 * may itself be a proxy handle of an earlier gateway (multi-hop): the
 * chunk transfer is then delegated again, so no hop holds the whole
 * transfer.
 */
#include "gw_bulk.h"

#include <stdlib.h>
#include <string.h>

static void pipe_fill(struct gw_pipe *p);

/* Stop the pipeline with @p st; @p where names the failed step (NULL: a
 * cancel).  The first failure is logged: the caller only sees a status. */
static void pipe_fail(struct gw_pipe *p, cw_status_t st, const char *where)
{
    struct gw_staging *s = &p->gb->pool;

    if (p->st == CW_OK && where != NULL && st != CW_CANCELED)
        CW_LOG_RL(CW_LOG_INFO, GW_LOG,
                  "bulk delegation of %zu bytes failed "
                  "%s at byte %zu: %s",
                  p->len, where, p->done, cw_status_name(st));
    if (p->st == CW_OK)
        p->st = st;
    if (p->stop)
        return;
    p->stop = true;
    gw_staging_unwait(s, p);
    for (unsigned i = 0; i < s->nslots; i++)
        if (s->slots[i].pipe == p && s->slots[i].op != NULL)
            cw_bulk_cancel(s->slots[i].op);
}

static void pipe_finish(struct gw_pipe *p)
{
    struct gw_bulk *gb = p->gb;
    cw_status_t st;

    gw_staging_unwait(&gb->pool, p);
    nau_list_del(&p->link);
    gb->npipes--;
    if (p->st == CW_OK) {
        gb->transfers++;
        gb->bytes += p->len;
    } else {
        gb->failed++;
    }
    st = cw_respond(p->h, p->st, NULL, NULL);
    if (st != CW_OK && st != CW_CANCELED && st != CW_TIMEOUT)
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "cannot answer a bulk delegation: %s",
                  cw_status_str(st));
    cw_handle_release(p->h);
    cw_bulk_free(p->req_bulk);
    p->tok->npipes--;
    gw_btok_unref(p->tok);
    free(p);
}

static void pipe_check(struct gw_pipe *p)
{
    if (p->active == 0 && (p->stop || p->done == p->len))
        pipe_finish(p);
}

static bool pipe_gone(const struct gw_pipe *p)
{
    return p->tok->revoked || cw_handle_canceled(p->h);
}

/* The slot goes back while @p p still counts it: the pool may hand it to
 * @p p itself, whose next chunk may fail to start, and @p p must not finish
 * (and be freed) under its caller, which checks it afterwards. */
static void slot_drop(struct gw_pipe *p, struct gw_stage_slot *slot)
{
    slot->op = NULL;
    gw_staging_put(&p->gb->pool, slot);
    p->active--;
}

static void put_cb(cw_status_t st, void *arg)
{
    struct gw_stage_slot *slot = arg;
    struct gw *gw = slot->pipe->gb->gw;
    struct gw_pipe *p;
    size_t n;

    gw_lock(gw); /* threaded: this runs on the destination's shard */
    p = slot->pipe;
    n = slot->n;

    if (st == CW_OK)
        p->done += n;
    else
        pipe_fail(p, st, "writing to the destination");
    slot_drop(p, slot);
    if (!p->stop && pipe_gone(p))
        pipe_fail(p, CW_CANCELED, NULL);
    pipe_fill(p);
    pipe_check(p);
    gw_unlock(gw);
}

static void get_cb_locked(cw_status_t st, struct gw_stage_slot *slot)
{
    struct gw_pipe *p = slot->pipe;

    slot->op = NULL;
    if (st != CW_OK)
        pipe_fail(p, st, "reading the source");
    else if (!p->stop && pipe_gone(p))
        pipe_fail(p, CW_CANCELED, NULL);
    if (!p->stop) {
        st = cw_bulk_transfer(p->dsh->ctx, CW_BULK_PUSH, p->dpeer, p->dbulk,
                              p->doff + slot->off, slot->bulk[p->dsh->idx], 0,
                              slot->n, put_cb, slot, &slot->op);
        if (st == CW_OK)
            return;
        pipe_fail(p, st, "starting a write to the destination");
    }
    slot_drop(p, slot);
    pipe_check(p);
}

static void get_cb(cw_status_t st, void *arg)
{
    struct gw_stage_slot *slot = arg;
    struct gw *gw = slot->pipe->gb->gw;

    gw_lock(gw); /* threaded: this runs on the source's shard */
    get_cb_locked(st, slot);
    gw_unlock(gw);
}

/* Start the chunk at p->next in @p slot. */
static void pipe_start(struct gw_pipe *p, struct gw_stage_slot *slot)
{
    size_t n = p->len - p->next;
    cw_status_t st;

    if (n > p->gb->pool.chunk)
        n = p->gb->pool.chunk;
    slot->off = p->next;
    slot->n = n;
    p->next += n;
    p->active++;
    st = cw_bulk_transfer(p->ssh->ctx, CW_BULK_PULL, p->speer, p->sbulk,
                          p->soff + slot->off, slot->bulk[p->ssh->idx], 0, n,
                          get_cb, slot, &slot->op);
    if (st != CW_OK) {
        pipe_fail(p, st, "starting a read from the source");
        slot_drop(p, slot);
    }
}

static void pipe_fill(struct gw_pipe *p)
{
    while (!p->stop && p->next < p->len && p->active < p->depth) {
        struct gw_stage_slot *slot = gw_staging_get(&p->gb->pool, p);
        if (slot == NULL)
            return;
        pipe_start(p, slot);
    }
}

void gw_pipe_resume(struct gw_pipe *p, struct gw_stage_slot *slot)
{
    /* Its token may have been revoked (or the delegation cancelled) while
     * it waited: no byte moves after that. */
    if (!p->stop && pipe_gone(p))
        pipe_fail(p, CW_CANCELED, NULL);
    if (p->stop || p->next >= p->len) {
        /* Stopped just above (stopped transfers leave the queue). */
        slot->pipe = p;
        p->active++;
        slot_drop(p, slot);
        pipe_check(p);
        return;
    }
    pipe_start(p, slot);
    pipe_fill(p);
    pipe_check(p);
}

void gw_pipe_revoke(struct gw_bulk *gb, struct gw_btok *t)
{
    struct gw_pipe *p, *next;

    /* A waiting transfer would otherwise learn of it only when a chunk
     * frees up, which may be long after. */
    if (t->npipes == 0)
        return;
    for (p = gb->pool.wait_head; p != NULL; p = next) {
        next = p->wnext;
        if (p->tok != t)
            continue;
        pipe_fail(p, CW_CANCELED, NULL);
        pipe_check(p);
    }
}

/* Zero-staging: answer a checked delegation with a grant when origin and
 * requester share a node-local plugin (docs/bulk-gateway.md).  True when
 * answered; false leaves it to the pipeline. */
static bool gw_bulk_grant(struct gw_bulk *gb, cw_handle_t *h,
                          struct cw_bproxy_req *r, struct gw_btok *tok)
{
    uint64_t now = cw_now_ns(), life_ms;
    cw_status_t st;

    if (!gb->gw->cfg->buffers.zero_copy || !cw_bgrant_possible(h, r, tok->bulk))
        return false;
    life_ms = tok->expiry_ns > now ? (tok->expiry_ns - now) / 1000000u : 0;
    if (life_ms > CW_BPROXY_GRANT_LIFE_MS)
        life_ms = CW_BPROXY_GRANT_LIFE_MS;
    if (life_ms == 0)
        life_ms = 1;
    st = cw_bgrant_write(h, r, tok->bulk, tok->peer, life_ms);
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "cannot grant a bulk delegation, "
                  "staging it: %s",
                  cw_status_str(st));
        return false;
    }
    gb->direct_transfers++;
    gb->direct_bytes += r->len;
    cw_bulk_free(r->bulk);
    gw_btok_unref(tok);
    gw_answer(h, CW_OK);
    return true;
}

static void gw_bulk_handler_locked(cw_handle_t *h, struct gw_bulk *gb,
                                   struct gw_shard *sh)
{
    struct cw_bproxy_req r;
    struct gw_btok *tok = NULL;
    struct gw_pipe *p;
    cw_status_t st;

    st = cw_bproxy_req_decode(h, &r);
    if (st == CW_OK)
        st = gw_btok_check(gb, &r, h, &tok);
    else if (st == CW_BAD_HANDLE)
        gb->rej_bad_handle++;
    else if (st == CW_RANGE)
        gb->rej_range++;
    else
        gb->rej_malformed++;
    if (st != CW_OK) {
        cw_bulk_free(r.bulk);
        gw_answer(h, st);
        return;
    }
    if (gw_bulk_grant(gb, h, &r, tok))
        return;
    if (tok->npipes >= GW_BTOK_MAX_PIPES) {
        /* Each waits for staging with a little state of its own: one token
         * does not get to queue without bound. */
        gb->rej_busy++;
        gw_btok_unref(tok);
        cw_bulk_free(r.bulk);
        gw_answer(h, CW_BUSY);
        return;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        gw_btok_unref(tok);
        cw_bulk_free(r.bulk);
        gw_answer(h, CW_NOMEM);
        return;
    }
    p->gb = gb;
    p->h = h;
    p->tok = tok;
    p->req_bulk = r.bulk;
    p->len = r.len;
    p->depth = gb->gw->cfg->buffers.depth;
    if (p->depth == 0)
        p->depth = 1;
    if (p->depth > gb->pool.nslots)
        p->depth = gb->pool.nslots;
    if (r.dir == CW_BULK_PULL) {
        /* The target reads the proxied region into its bytes. */
        p->ssh = tok->sh;
        p->dsh = sh;
        p->sbulk = tok->bulk;
        p->speer = tok->peer;
        p->soff = r.off;
        p->dbulk = r.bulk;
        p->dpeer = cw_handle_source(h);
    } else {
        p->ssh = sh;
        p->dsh = tok->sh;
        p->sbulk = r.bulk;
        p->speer = cw_handle_source(h);
        p->dbulk = tok->bulk;
        p->dpeer = tok->peer;
        p->doff = r.off;
    }
    nau_list_add_tail(&gb->pipes, &p->link);
    gb->npipes++;
    tok->npipes++;
    pipe_fill(p);
    pipe_check(p);
}

/* Threaded: registered on every shard's context (the delegation arrives
 * on the network the token was issued for); runs under gw->lock. */
static void gw_bulk_handler(cw_handle_t *h, void *arg)
{
    struct gw_bulk *gb = arg;
    struct gw *gw = gb->gw;
    struct gw_shard *sh = &gw->shards[0];

    for (unsigned i = 1; i < gw->nshards; i++)
        if (gw->shards[i].ctx == cw_handle_context(h))
            sh = &gw->shards[i];
    gw_lock(gw);
    gw_bulk_handler_locked(h, gb, sh);
    gw_unlock(gw);
}

cw_status_t gw_bulk_init(struct gw *gw, const struct cw_config *cfg)
{
    struct gw_bulk *gb;
    uint64_t bytes = cfg->buffers.staging;
    cw_status_t st;

    gb = calloc(1, sizeof(*gb));
    if (gb == NULL)
        return CW_NOMEM;
    gb->gw = gw;
    nau_list_init(&gb->pipes);
    if (cfg->limits.max_bulk_bytes_inflight != 0 &&
        cfg->limits.max_bulk_bytes_inflight < bytes)
        bytes = cfg->limits.max_bulk_bytes_inflight;
    st = gw_staging_init(&gb->pool, gw, bytes, cfg->buffers.chunk);
    if (st != CW_OK) {
        CW_ERROR(GW_LOG,
                 "cannot set up %llu bytes of bulk staging in "
                 "chunks of %llu: %s",
                 (unsigned long long)bytes,
                 (unsigned long long)cfg->buffers.chunk, cw_status_str(st));
        free(gb);
        return st;
    }
    for (unsigned i = 0; i < gw->nshards; i++) {
        st = cw_rpc_register(gw->shards[i].ctx, CW_BPROXY_RPC, gw_bulk_handler,
                             gb, NULL, &gb->rpc_id);
        if (st != CW_OK) {
            CW_ERROR(GW_LOG, "cannot register %s: %s", CW_BPROXY_RPC,
                     cw_status_str(st));
            while (i-- > 0)
                cw_rpc_deregister(gw->shards[i].ctx, gb->rpc_id);
            gw_staging_fini(&gb->pool);
            free(gb);
            return st;
        }
    }
    gw->bulk = gb;
    return CW_OK;
}

void gw_bulk_fini(struct gw *gw)
{
    struct gw_bulk *gb = gw->bulk;
    struct nau_list *l;

    if (gb == NULL)
        return;
    nau_list_for_each(l, &gb->pipes)
    {
        pipe_fail(nau_container_of(l, struct gw_pipe, link), CW_CANCELED, NULL);
    }
    /* The shards' threads are stopped by now: drive every context here. */
    for (int i = 0; i < 400 && gb->npipes > 0; i++) {
        for (unsigned k = 0; k < gw->nshards; k++) {
            cw_progress(gw->shards[k].ctx, gw->nshards > 1 ? 1 : 5);
            cw_trigger(gw->shards[k].ctx, 0, 0, NULL);
        }
    }
    for (unsigned k = 0; k < gw->nshards; k++)
        cw_rpc_deregister(gw->shards[k].ctx, gb->rpc_id);
    gw_btok_fini(gb);
    if (gb->npipes > 0) {
        /* Chunks still in flight may write into staging: keep it. */
        CW_WARN(GW_LOG, "%u bulk transfers did not stop; staging kept",
                gb->npipes);
    } else {
        if (gb->pool.nfree != gb->pool.nslots)
            CW_WARN(GW_LOG, "%u of %u staging chunks not returned",
                    gb->pool.nslots - gb->pool.nfree, gb->pool.nslots);
        gw_staging_fini(&gb->pool);
    }
    CW_INFO(
        GW_LOG,
        "bulk: %llu tokens issued, %llu transfers, %llu bytes, "
        "%llu failed, %llu direct (%llu bytes), rejected %llu bad "
        "%llu expired %llu range %llu permission %llu malformed %llu "
        "busy, %llu staging waits",
        (unsigned long long)gb->issued, (unsigned long long)gb->transfers,
        (unsigned long long)gb->bytes, (unsigned long long)gb->failed,
        (unsigned long long)gb->direct_transfers,
        (unsigned long long)gb->direct_bytes,
        (unsigned long long)gb->rej_bad_handle,
        (unsigned long long)gb->rej_expired, (unsigned long long)gb->rej_range,
        (unsigned long long)gb->rej_permission,
        (unsigned long long)gb->rej_malformed, (unsigned long long)gb->rej_busy,
        (unsigned long long)gb->pool.waits);
    free(gb);
    gw->bulk = NULL;
}

void gw_bulk_stats(struct gw *gw, FILE *out, bool json)
{
    struct gw_bulk *gb = gw->bulk;

    if (gb == NULL)
        return;
    fprintf(
        out,
        json ? ",\"bulk\":{\"tokens_issued\":%llu,\"tokens_live\":"
               "%llu,\"transfers\":%llu,\"bytes\":%llu,\"failed\":"
               "%llu,\"active\":%u,\"direct_transfers\":%llu,"
               "\"direct_bytes\":%llu,\"rejected_bad_handle\":%llu,"
               "\"rejected_expired\":%llu,\"rejected_range\":%llu,"
               "\"rejected_permission\":%llu,"
               "\"rejected_malformed\":%llu,\"rejected_busy\":%llu,"
               "\"staging_chunks\":%u,"
               "\"staging_free\":%u,\"staging_uses\":%llu,"
               "\"staging_waits\":%llu}"
             : "bulk tokens   %llu issued, %llu live\n"
               "bulk moved    %llu transfers, %llu bytes, %llu "
               "failed, %u active\n"
               "bulk direct   %llu transfers, %llu bytes "
               "(zero-staging grants)\n"
               "bulk rejected %llu bad handle, %llu expired, %llu "
               "range, %llu permission, %llu malformed, %llu busy\n"
               "bulk staging  %u chunks, %u free, %llu uses, %llu "
               "waits\n\n",
        (unsigned long long)gb->issued,
        (unsigned long long)(gb->issued - gb->revoked),
        (unsigned long long)gb->transfers, (unsigned long long)gb->bytes,
        (unsigned long long)gb->failed, gb->npipes,
        (unsigned long long)gb->direct_transfers,
        (unsigned long long)gb->direct_bytes,
        (unsigned long long)gb->rej_bad_handle,
        (unsigned long long)gb->rej_expired, (unsigned long long)gb->rej_range,
        (unsigned long long)gb->rej_permission,
        (unsigned long long)gb->rej_malformed, (unsigned long long)gb->rej_busy,
        gb->pool.nslots, gb->pool.nfree, (unsigned long long)gb->pool.uses,
        (unsigned long long)gb->pool.waits);
}

void gw_bulk_metrics(struct gw *gw, FILE *out)
{
    struct gw_bulk *gb = gw->bulk;

    if (gb == NULL)
        return;
    /* One row per sample; a family's HELP and TYPE come with its first. */
    const struct {
        const char *name, *type, *help, *labels;
        uint64_t v;
    } m[] = {
        {"causeway_bulk_tokens_issued_total", "counter",
         "Proxy handles issued.", "", gb->issued},
        {"causeway_bulk_tokens_live", "gauge", "Proxy handles not revoked yet.",
         "", gb->issued - gb->revoked},
        {"causeway_bulk_transfers_total", "counter",
         "Delegated transfers, by path (staged: pipelined through staging; "
         "direct: zero-staging grant).",
         "{path=\"staged\"}", gb->transfers},
        {"causeway_bulk_transfers_total", NULL, NULL, "{path=\"direct\"}",
         gb->direct_transfers},
        {"causeway_bulk_bytes_total", "counter",
         "Bytes of delegated transfers, by path.", "{path=\"staged\"}",
         gb->bytes},
        {"causeway_bulk_bytes_total", NULL, NULL, "{path=\"direct\"}",
         gb->direct_bytes},
        {"causeway_bulk_failed_total", "counter",
         "Delegated transfers that failed.", "", gb->failed},
        {"causeway_bulk_active_transfers", "gauge", "Staged transfers running.",
         "", gb->npipes},
        {"causeway_bulk_staging_chunks", "gauge", "Staging chunks, by state.",
         "{state=\"free\"}", gb->pool.nfree},
        {"causeway_bulk_staging_chunks", NULL, NULL, "{state=\"used\"}",
         gb->pool.nslots - gb->pool.nfree},
        {"causeway_bulk_staging_waits_total", "counter",
         "Times a transfer waited for a staging chunk.", "", gb->pool.waits},
        {"causeway_bulk_rejected_total", "counter",
         "Delegations refused, by reason.", "{reason=\"bad_handle\"}",
         gb->rej_bad_handle},
        {"causeway_bulk_rejected_total", NULL, NULL, "{reason=\"expired\"}",
         gb->rej_expired},
        {"causeway_bulk_rejected_total", NULL, NULL, "{reason=\"range\"}",
         gb->rej_range},
        {"causeway_bulk_rejected_total", NULL, NULL, "{reason=\"permission\"}",
         gb->rej_permission},
        {"causeway_bulk_rejected_total", NULL, NULL, "{reason=\"malformed\"}",
         gb->rej_malformed},
        {"causeway_bulk_rejected_total", NULL, NULL, "{reason=\"busy\"}",
         gb->rej_busy},
    };

    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        if (m[i].type != NULL)
            gw_metric_head(out, m[i].name, m[i].type, m[i].help);
        fprintf(out, "%s%s %llu\n", m[i].name, m[i].labels,
                (unsigned long long)m[i].v);
    }
}
