/*
 * Admission control: bounded RPCs in flight (total, per ingress network,
 * per route) and per-source fairness.  Beyond a bound the caller is told
 * CW_BUSY at once; nothing is queued.
 *
 * Fairness: a quarter of the total limit is kept for sources that have
 * nothing in flight yet, and the rest is shared equally among the sources
 * that do, so a flooding client hits CW_BUSY while a newcomer still gets
 * through and then holds its own share.
 */
#include "gw_int.h"

#include <stdlib.h>
#include <string.h>

static size_t gw_src_bucket(const char *key)
{
    return gw_hash(key) % GW_SRC_BUCKETS;
}

static struct gw_source *gw_source_find(struct gw *gw, const char *key)
{
    for (struct gw_source *s = gw->srcs[gw_src_bucket(key)]; s != NULL;
         s = s->next)
        if (strcmp(s->key, key) == 0)
            return s;
    return NULL;
}

cw_status_t gw_admit(struct gw *gw, struct gw_net *ingress,
                     struct gw_route_stats *rs, unsigned route_cap,
                     const char *src_key, struct gw_source **src_p)
{
    unsigned limit = gw->cfg->limits.max_inflight_rpcs;
    struct gw_source *s = gw_source_find(gw, src_key);
    size_t n;

    if (limit != 0 && gw->inflight >= limit)
        return CW_BUSY;
    if (route_cap != 0 && rs->inflight >= route_cap)
        return CW_BUSY;
    if (ingress != NULL) {
        int i = cw_config_network_find(gw->cfg, ingress->name);
        unsigned cap = i >= 0 ? gw->cfg->networks[i].max_inflight : 0;
        if (cap != 0 && ingress->inflight >= cap)
            return CW_BUSY;
    }
    if (limit >= 4) {
        /* A quarter of the slots is kept for sources that are not active
         * yet; the rest is shared equally among the active ones. */
        unsigned reserve = limit / 4;
        unsigned active = gw->nsrcs + (s == NULL ? 1 : 0);
        unsigned share = (limit - reserve) / (active ? active : 1);
        if (share == 0)
            share = 1;
        if (s != NULL && s->inflight >= share)
            return CW_BUSY;
    }
    if (s == NULL) {
        n = strlen(src_key);
        s = malloc(sizeof(*s) + n + 1);
        if (s == NULL)
            return CW_NOMEM;
        memcpy(s->key, src_key, n + 1);
        s->inflight = 0;
        size_t b = gw_src_bucket(src_key);
        s->next = gw->srcs[b];
        gw->srcs[b] = s;
        gw->nsrcs++;
    }
    s->inflight++;
    *src_p = s;
    return CW_OK;
}

void gw_admit_done(struct gw *gw, struct gw_source *src)
{
    struct gw_source **pp;

    if (src == NULL || --src->inflight > 0)
        return;
    /* Idle sources are dropped so that the share is computed over the
     * sources that are active now. */
    for (pp = &gw->srcs[gw_src_bucket(src->key)]; *pp != NULL;
         pp = &(*pp)->next) {
        if (*pp == src) {
            *pp = src->next;
            free(src);
            gw->nsrcs--;
            return;
        }
    }
}

void gw_sources_fini(struct gw *gw)
{
    for (unsigned b = 0; b < GW_SRC_BUCKETS; b++) {
        while (gw->srcs[b] != NULL) {
            struct gw_source *s = gw->srcs[b];
            gw->srcs[b] = s->next;
            free(s);
        }
    }
    gw->nsrcs = 0;
}
