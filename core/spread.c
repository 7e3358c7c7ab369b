/*
 * One address, several contexts (docs/api.md, "Serving on several
 * threads").
 *
 * A server opens its published address on its first context and a private
 * endpoint of the same plugin and protocol on each of the others
 * (cw_network_open_spread).  Callers keep using the published address: the
 * first request a caller's context sends to an address carries
 * CW_HF_PIN_ASK, and the published endpoint answers it with CW_HF_PIN and
 * the address of the member the caller is given, round robin.  From then
 * on the caller's context sends everything for that address to the member,
 * so each caller's requests stay on one thread of the server and nothing
 * changes thread on the server's side.
 *
 * Order per caller holds across the move, and on a connection just made:
 * the asking request goes alone, and the ones made meanwhile wait in the
 * caller (pin->held) until it has left (its send completed), then go to
 * the published endpoint.  If the answer named a member, what is made
 * from then on waits until everything at the published endpoint has
 * completed; then the first goes to the member alone and the rest once
 * it has left.  Over libfabric's rxm the first messages on a connection
 * just made reached the server after later ones (unit-rpc-spread-ofi-tcp,
 * gw-workers, docs/na-ofi.md).  A server that does not spread answers without
 * CW_HF_PIN and the caller stays where it is.  A member that fails on its
 * transport (the server restarted: its members listen elsewhere now) is
 * forgotten: the next request goes to the published address and asks
 * again.
 *
 * Everything here but freeing a network's pins and members runs with the
 * context's lock held (each entry point asserts it).
 */
#include "rpc_priv.h"

#include <causeway/relay.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The member endpoints' URIs, on the published network (net->spread). */
struct cw_spread {
    unsigned n;
    unsigned next; /**< round robin over members */
    char uri[][CW_URI_MAX];
};

/* ---- server: giving pins -------------------------------------------------*/

const char *cw_spread_pick(cw_network_t *net)
{
    struct cw_spread *s = net->spread;
    unsigned k;

    CW_ASSERT_LOCKED(&net->ctx->lock);
    if (s == NULL)
        return NULL;
    k = s->next++ % s->n;
    net->ctx->stats.pins_given++;
    return s->uri[k];
}

void cw_spread_free(cw_network_t *net)
{
    free(net->spread);
    net->spread = NULL;
}

/* "ofi+tcp://10.0.0.1:7000" -> "ofi+tcp://10.0.0.1:0"; a location without
 * a port ("shm://name") -> "shm://": the plugin chooses. */
static cw_status_t member_uri(const char *published, char *buf, size_t len)
{
    struct cw_uri u;
    size_t n, i;
    cw_status_t st;

    st = cw_uri_parse(published, &u);
    if (st != CW_OK)
        return st;
    n = strlen(u.location);
    for (i = n; i > 0 && u.location[i - 1] >= '0' && u.location[i - 1] <= '9';
         i--)
        ;
    if (i > 0 && i < n && u.location[i - 1] == ':') {
        u.location[i] = '0';
        u.location[i + 1] = '\0';
    } else {
        u.location[0] = '\0';
    }
    return cw_uri_format(&u, buf, len);
}

cw_status_t cw_network_open_spread(cw_context_t *const *ctxs, unsigned n,
                                   const char *uri, uint32_t flags,
                                   cw_network_t **nets_p)
{
    struct cw_spread *s;
    char muri[CW_URI_MAX];
    unsigned i;
    cw_status_t st;

    if (ctxs == NULL || n == 0 || uri == NULL || nets_p == NULL ||
        !(flags & CW_NET_LISTEN))
        return CW_INVALID_ARG;
    for (i = 0; i < n; i++)
        for (unsigned j = 0; j < i; j++)
            if (ctxs[i] == NULL || ctxs[i] == ctxs[j])
                return CW_INVALID_ARG;
    if (ctxs[0] == NULL)
        return CW_INVALID_ARG;
    s = calloc(1, sizeof(*s) + (size_t)n * CW_URI_MAX);
    if (s == NULL)
        return CW_NOMEM;
    s->n = n;
    st = cw_network_open(ctxs[0], uri, flags, &nets_p[0]);
    if (st != CW_OK)
        goto err_free;
    snprintf(s->uri[0], CW_URI_MAX, "%s", nets_p[0]->uri);
    st = member_uri(nets_p[0]->uri, muri, sizeof(muri));
    if (st != CW_OK) {
        CW_ERROR("core", "cannot derive member endpoints from %s",
                 nets_p[0]->uri);
        i = 1;
        goto err_close;
    }
    for (i = 1; i < n; i++) {
        st = cw_network_open(ctxs[i], muri, flags, &nets_p[i]);
        if (st != CW_OK)
            goto err_close;
        snprintf(s->uri[i], CW_URI_MAX, "%s", nets_p[i]->uri);
    }
    cw_mutex_lock(&ctxs[0]->lock);
    nets_p[0]->spread = s;
    cw_mutex_unlock(&ctxs[0]->lock);
    return CW_OK;

err_close:
    while (i-- > 0)
        cw_network_close(nets_p[i]);
err_free:
    free(s);
    return st;
}

/* ---- caller: taking pins -------------------------------------------------*/

/* The pin of @p h's first hop, made on first use; NULL when the network's
 * table is full (that address is then used as it is). */
static struct cw_pin *pin_of(cw_handle_t *h)
{
    cw_addr_t *a = h->use.cli.addr;
    cw_network_t *net = h->use.net;
    struct cw_pin *p;
    unsigned n = 0;

    if (a->pin != NULL || a->pin_none)
        return a->pin;
    for (p = net->pins; p; p = p->next, n++)
        if (cw_na_addr_cmp(net->na, p->home, a->na))
            break;
    if (p == NULL && n < CW_PIN_MAX) {
        p = calloc(1, sizeof(*p));
        if (p != NULL && cw_na_addr_dup(net->na, a->na, &p->home) != CW_OK) {
            free(p);
            p = NULL;
        }
        if (p != NULL) {
            nau_list_init(&p->held);
            p->next = net->pins;
            net->pins = p;
        }
    }
    a->pin = p;
    a->pin_none = p == NULL;
    return p;
}

/* @p h waits on @p p's list, counted pending (cw_pin_route's "true"). */
static bool pin_hold(cw_handle_t *h, struct cw_pin *p)
{
    h->use.cli.pin = p;
    cw_h_flag_set(h, CW_HFL_PIN_HELD);
    h->use.pending++;
    nau_list_add_tail(&p->held, &h->use.cli.pin_link);
    h->ctx->stats.pin_held++;
    return true;
}

bool cw_pin_route(cw_handle_t *h, uint16_t *flags)
{
    struct cw_pin *p;

    CW_ASSERT_LOCKED(&h->ctx->lock);
    h->use.cli.peer = h->use.cli.addr->na;
    h->use.cli.pin =
        NULL; /* only a forward counted on a pin, or waiting, has one */
    if (h->use.cli.addr->self)
        return false;
    p = pin_of(h);
    if (p == NULL)
        return false;
    switch (p->state) {
    case CW_PIN_NEW:
        if (h->use.rflags & CW_HF_ONE_WAY)
            return false; /* no answer to carry the pin */
        *flags |= CW_HF_PIN_ASK;
        p->state = CW_PIN_ASKED;
        p->opened = false;
        cw_h_flag_set(h, CW_HFL_PIN_ASKER);
        h->use.cli.pin = p;
        cw_h_flag_set(h, CW_HFL_PIN_HOME);
        p->home_inflight++;
        return false;
    case CW_PIN_MOVING:
        if (p->home_inflight == 0) {
            /* The first at the member: alone until it has completed. */
            p->state = CW_PIN_WARMING;
            h->use.cli.pin = p;
            cw_h_flag_set(h, CW_HFL_PIN_WARM);
            h->use.cli.peer = p->member;
            return false;
        }
        return pin_hold(h, p); /* behind what is at the published one */
    case CW_PIN_ASKED:
        if (p->opened) { /* the connection is made: at home until moved */
            h->use.cli.pin = p;
            cw_h_flag_set(h, CW_HFL_PIN_HOME);
            p->home_inflight++;
            return false;
        }
        return pin_hold(h, p); /* behind the asking request */
    case CW_PIN_WARMING:
        return pin_hold(h, p); /* behind the first request to the member */
    case CW_PIN_MOVED:
        h->use.cli.pin = p; /* cw_pin_check_member: the member may fail */
        h->use.cli.peer = p->member;
        return false;
    case CW_PIN_HOME:
        return false;
    }
    return false;
}

void cw_pin_answer(cw_handle_t *h, const char *uri, size_t len)
{
    struct cw_pin *p = h->use.cli.pin;
    cw_network_t *net = h->use.net;
    char s[CW_URI_MAX];
    cw_na_addr_t *member;

    CW_ASSERT_LOCKED(&h->ctx->lock);
    if (p == NULL || !cw_h_flag(h, CW_HFL_PIN_ASKER) ||
        p->state != CW_PIN_ASKED)
        return;
    if (len == 0 || len >= sizeof(s)) {
        p->state = CW_PIN_HOME;
        return;
    }
    memcpy(s, uri, len);
    s[len] = '\0';
    if (cw_na_addr_lookup(net->na, s, &member) != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "%s named member %s, which does not "
                  "resolve: staying on the address",
                  net->uri, s);
        p->state = CW_PIN_HOME;
        return;
    }
    if (cw_na_addr_cmp(net->na, member, p->home)) {
        cw_na_addr_free(net->na, member);
        p->state = CW_PIN_HOME;
        return;
    }
    p->member = member;
    p->state = CW_PIN_MOVING;
    h->ctx->stats.pins_taken++;
}

/* Whether the oldest waiting forward may go now: all of them in HOME and
 * MOVED; in NEW the first becomes the asker and in MOVING (nothing left at
 * the published address) the warm-up, and the rest wait on. */
static bool pin_may_send(const struct cw_pin *p)
{
    return p->state == CW_PIN_HOME || p->state == CW_PIN_MOVED ||
           p->state == CW_PIN_NEW || (p->state == CW_PIN_ASKED && p->opened) ||
           (p->state == CW_PIN_MOVING && p->home_inflight == 0);
}

/* Send what waited, oldest first, as long as the pin lets them go. */
static void pin_release_held(struct cw_pin *p)
{
    while (!nau_list_empty(&p->held) && pin_may_send(p)) {
        cw_handle_t *h =
            nau_container_of(p->held.next, cw_handle_t, use.cli.pin_link);
        cw_status_t st;

        nau_list_del(&h->use.cli.pin_link);
        cw_h_flag_clear(h, CW_HFL_PIN_HELD);
        h->use.pending--;
        /* Released by a cancel sweep (network closing, context going):
         * what waited fails with the rest. */
        if (h->use.net->closed || h->ctx->destroying)
            st = CW_DISCONNECTED;
        else
            st = cw_forward_net(h);
        if (st != CW_OK)
            cw_h_fail(h, st);
        cw_h_check(h);
    }
}

void cw_pin_sent(cw_handle_t *h)
{
    struct cw_pin *p = h->use.cli.pin;

    CW_ASSERT_LOCKED(&h->ctx->lock);
    if (cw_h_flag(h, CW_HFL_PIN_WARM) && p->state == CW_PIN_WARMING)
        p->state = CW_PIN_MOVED;
    else if (cw_h_flag(h, CW_HFL_PIN_ASKER) && p->state == CW_PIN_ASKED)
        p->opened = true;
    pin_release_held(p);
}

void cw_pin_gate_done(cw_handle_t *h)
{
    struct cw_pin *p = h->use.cli.pin;

    CW_ASSERT_LOCKED(&h->ctx->lock);
    if (cw_h_flag(h, CW_HFL_PIN_WARM)) {
        /* Whatever its outcome, the member has had its first message
         * (cw_pin_sent moved on already, unless the send never ended). */
        cw_h_flag_clear(h, CW_HFL_PIN_WARM);
        if (p->state == CW_PIN_WARMING)
            p->state = CW_PIN_MOVED;
        pin_release_held(p);
        return;
    }
    cw_h_flag_clear(h, CW_HFL_PIN_HOME);
    if (cw_h_flag(h, CW_HFL_PIN_ASKER)) {
        cw_h_flag_clear(h, CW_HFL_PIN_ASKER);
        /* Answered without a pin: the peer does not spread.  Failed before
         * any answer: ask again with the next request. */
        if (p->state == CW_PIN_ASKED)
            p->state = h->use.final == CW_OK ? CW_PIN_HOME : CW_PIN_NEW;
    }
    --p->home_inflight;
    pin_release_held(p);
}

/* A member given up on: its NA address stays valid (forwards sent there
 * still point at it) until the network is freed. */
struct cw_pin_retired {
    struct cw_pin_retired *next;
    cw_na_addr_t *addr;
};

void cw_pin_check_member(cw_handle_t *h)
{
    struct cw_pin *p = h->use.cli.pin;
    struct cw_pin_retired *r;
    cw_status_t st = h->use.final;

    CW_ASSERT_LOCKED(&h->ctx->lock);
    if (h->use.role == CW_H_SERVER || p->member == NULL ||
        h->use.cli.peer != p->member ||
        (st != CW_DISCONNECTED && st != CW_UNREACHABLE && st != CW_IO))
        return;
    r = malloc(sizeof(*r));
    if (r == NULL)
        return; /* keep the pin: forwards fail until memory comes back */
    r->addr = p->member;
    r->next = p->retired;
    p->retired = r;
    p->member = NULL;
    cw_h_flag_clear(h, CW_HFL_PIN_WARM);
    p->state = CW_PIN_NEW;
    CW_LOG_RL(CW_LOG_INFO, "core",
              "%s: the member of a spread address "
              "failed (%s): asking the address again",
              h->use.net->uri, cw_status_name(st));
    /* What waited for a warm-up that failed goes by the address now. */
    if (p->home_inflight == 0)
        pin_release_held(p);
}

void cw_pin_unhold(cw_handle_t *h)
{
    CW_ASSERT_LOCKED(&h->ctx->lock);
    nau_list_del(&h->use.cli.pin_link);
    cw_h_flag_clear(h, CW_HFL_PIN_HELD);
    h->use.pending--;
}

cw_status_t cw_relay_hop_member(const cw_addr_t *hop, char *buf, size_t len)
{
    cw_network_t *net;
    cw_status_t st = CW_NOENT;

    if (hop == NULL || buf == NULL || len == 0 || hop->route != NULL ||
        hop->self)
        return CW_INVALID_ARG;
    net = hop->net;
    cw_mutex_lock(&hop->ctx->lock);
    for (struct cw_pin *p = net->pins; p != NULL; p = p->next) {
        if (!cw_na_addr_cmp(net->na, p->home, hop->na))
            continue;
        /* MOVING and WARMING send there already, or will once what went
         * to the published address has completed. */
        if (p->member != NULL &&
            (p->state == CW_PIN_MOVING || p->state == CW_PIN_WARMING ||
             p->state == CW_PIN_MOVED))
            st = cw_na_addr_to_string(net->na, p->member, buf, len);
        break;
    }
    cw_mutex_unlock(&hop->ctx->lock);
    if (st != CW_OK)
        buf[0] = '\0';
    return st;
}

void cw_pins_free(cw_network_t *net)
{
    struct cw_pin *p, *next;

    for (p = net->pins; p; p = next) {
        struct cw_pin_retired *r, *rnext;

        next = p->next;
        cw_na_addr_free(net->na, p->home);
        if (p->member)
            cw_na_addr_free(net->na, p->member);
        for (r = p->retired; r; r = rnext) {
            rnext = r->next;
            cw_na_addr_free(net->na, r->addr);
            free(r);
        }
        free(p);
    }
    net->pins = NULL;
}
