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
 * from then on waits until everything for its destination (its routing
 * destination, or none: the server itself) at the published endpoint has
 * completed; then the first goes to the member alone and the rest once
 * it has left.  Order is kept per destination, not across them: a caller
 * of a gateway whose requests to one target wait there for a full route
 * holds back only its later requests to that target, not those to
 * others (gw-busy, "A route's cap holds back only that route's
 * requests").  Over libfabric's rxm the first messages on a connection
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

#include "nau_hash.h"

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

    CW_LOCK_ASSERT_HELD(&net->ctx->lock);
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
    cw_lock_take(&ctxs[0]->lock);
    nets_p[0]->spread = s;
    cw_lock_give(&ctxs[0]->lock);
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

/* ---- lanes: order per destination across a move ---------------------- */

static struct cw_pin_lane *pin_lane(struct cw_pin *p, unsigned i)
{
    return i == 0 ? &p->ovf : &p->lanes[i - 1];
}

/* The lane of @p h's destination (its routing destination, or none: the
 * peer itself), taken from the free ones if it has none; 0 (the overflow
 * lane, shared) when the table is full or cannot grow, or when the
 * overflow lane has requests, which may be of this destination.  Two
 * destinations sharing a lane only wait for each other. */
static unsigned pin_lane_find(struct cw_pin *p, const cw_handle_t *h)
{
    const char *route =
        h->use.relay.route ? h->use.relay.route : h->use.cli.addr->route;
    uint64_t key = nau_fnv1a64(route ? route : "", route ? strlen(route) : 0);
    unsigned i, spare = 0;

    for (i = 0; i < p->nlanes; i++) {
        struct cw_pin_lane *l = &p->lanes[i];

        if (l->home == 0 && l->held == 0) {
            if (spare == 0)
                spare = i + 1;
        } else if (l->key == key) {
            return i + 1;
        }
    }
    if (p->ovf.home != 0 || p->ovf.held != 0)
        return 0;
    if (spare == 0) {
        if (p->nlanes == CW_PIN_LANES_MAX)
            return 0;
        if (p->nlanes == p->lanes_cap) {
            unsigned cap = p->lanes_cap ? 2 * p->lanes_cap : 4;
            struct cw_pin_lane *l = realloc(p->lanes, cap * sizeof(*l));

            if (l == NULL)
                return 0;
            p->lanes = l;
            p->lanes_cap = cap;
        }
        p->lanes[p->nlanes] = (struct cw_pin_lane){0};
        spare = ++p->nlanes;
    }
    p->lanes[spare - 1].key = key;
    return spare;
}

/* @p h is counted at the published endpoint, in its lane. */
static void pin_home(cw_handle_t *h, struct cw_pin *p)
{
    unsigned lane = pin_lane_find(p, h);

    h->use.cli.pin = p;
    h->use.cli.pin_lane = (uint16_t)lane;
    cw_h_flag_set(h, CW_HFL_PIN_HOME);
    pin_lane(p, lane)->home++;
    p->home_inflight++;
}

/* @p h waits on @p p's list in lane @p lane, counted pending
 * (cw_pin_route's "true"). */
static bool pin_hold(cw_handle_t *h, struct cw_pin *p, unsigned lane)
{
    h->use.cli.pin = p;
    h->use.cli.pin_lane = (uint16_t)lane;
    cw_h_flag_set(h, CW_HFL_PIN_HELD);
    h->use.pending++;
    pin_lane(p, lane)->held++;
    nau_list_add_tail(&p->held, &h->use.cli.pin_link);
    h->ctx->stats.pin_held++;
    return true;
}

/* Whether @p h, in lane @p lane, may go to the member now: nothing of its
 * destination is left at the published endpoint, and none waits before
 * it (the one leaving the list now is the oldest of its lane there). */
static bool pin_lane_clear(struct cw_pin *p, const cw_handle_t *h,
                           unsigned lane)
{
    const struct cw_pin_lane *l = pin_lane(p, lane);

    return l->home == 0 && (l->held == 0 || p->releasing == h);
}

bool cw_pin_route(cw_handle_t *h, uint16_t *flags)
{
    struct cw_pin *p;
    unsigned lane;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
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
        pin_home(h, p);
        return false;
    case CW_PIN_MOVING:
        lane = pin_lane_find(p, h);
        if (!pin_lane_clear(p, h, lane))
            return pin_hold(h, p, lane); /* behind its destination's */
        /* The first at the member: alone until it has left. */
        p->state = CW_PIN_WARMING;
        h->use.cli.pin = p;
        cw_h_flag_set(h, CW_HFL_PIN_WARM);
        h->use.cli.peer = p->member;
        return false;
    case CW_PIN_ASKED:
        if (p->opened) { /* the connection is made: at home until moved */
            pin_home(h, p);
            return false;
        }
        return pin_hold(h, p, pin_lane_find(p, h)); /* behind the asker */
    case CW_PIN_WARMING:
        /* behind the first request to the member */
        return pin_hold(h, p, pin_lane_find(p, h));
    case CW_PIN_MOVED:
        if (p->home_inflight != 0 || !nau_list_empty(&p->held)) {
            lane = pin_lane_find(p, h);
            if (!pin_lane_clear(p, h, lane))
                return pin_hold(h, p, lane);
        }
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

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
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

/* Whether the waiting forward @p h may go now: every one in HOME; in NEW
 * the first becomes the asker (and the rest wait on in ASKED); once the
 * asker has left, to the published endpoint; in MOVING and MOVED (to the
 * member, the first alone) when nothing of its destination is left at
 * the published endpoint. */
static bool pin_may_send(struct cw_pin *p, const cw_handle_t *h)
{
    switch (p->state) {
    case CW_PIN_HOME:
    case CW_PIN_NEW:
        return true;
    case CW_PIN_ASKED:
        return p->opened;
    case CW_PIN_MOVING:
    case CW_PIN_MOVED:
        return pin_lane(p, h->use.cli.pin_lane)->home == 0;
    case CW_PIN_WARMING:
        return false;
    }
    return false;
}

/* Send what waited, the oldest of each destination first, as long as the
 * pin lets them go.  Each one sent starts the look again from the oldest
 * (sending may change the state: the first to the member goes alone). */
static void pin_release_held(struct cw_pin *p)
{
    for (;;) {
        cw_handle_t *h = NULL;
        struct nau_list *it;
        cw_status_t st;

        nau_list_for_each(it, &p->held)
        {
            cw_handle_t *c =
                nau_container_of(it, cw_handle_t, use.cli.pin_link);

            if (pin_may_send(p, c)) {
                h = c;
                break;
            }
        }
        if (h == NULL)
            return;
        nau_list_del(&h->use.cli.pin_link);
        cw_h_flag_clear(h, CW_HFL_PIN_HELD);
        h->use.pending--;
        pin_lane(p, h->use.cli.pin_lane)->held--;
        /* Released by a cancel sweep (network closing, context going):
         * what waited fails with the rest. */
        if (h->use.net->closed || h->ctx->destroying) {
            st = CW_DISCONNECTED;
        } else {
            p->releasing = h;
            st = cw_forward_net(h);
            p->releasing = NULL;
        }
        if (st != CW_OK)
            cw_h_fail(h, st);
        cw_h_check(h);
    }
}

void cw_pin_sent(cw_handle_t *h)
{
    struct cw_pin *p = h->use.cli.pin;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (cw_h_flag(h, CW_HFL_PIN_WARM) && p->state == CW_PIN_WARMING)
        p->state = CW_PIN_MOVED;
    else if (cw_h_flag(h, CW_HFL_PIN_ASKER) && p->state == CW_PIN_ASKED)
        p->opened = true;
    pin_release_held(p);
}

void cw_pin_gate_done(cw_handle_t *h)
{
    struct cw_pin *p = h->use.cli.pin;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
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
    pin_lane(p, h->use.cli.pin_lane)->home--;
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

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
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
    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    nau_list_del(&h->use.cli.pin_link);
    cw_h_flag_clear(h, CW_HFL_PIN_HELD);
    h->use.pending--;
    pin_lane(h->use.cli.pin, h->use.cli.pin_lane)->held--;
}

cw_status_t cw_relay_hop_member(const cw_addr_t *hop, char *buf, size_t len)
{
    cw_network_t *net;
    cw_status_t st = CW_NOENT;

    if (hop == NULL || buf == NULL || len == 0 || hop->route != NULL ||
        hop->self)
        return CW_INVALID_ARG;
    net = hop->net;
    cw_lock_take(&hop->ctx->lock);
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
    cw_lock_give(&hop->ctx->lock);
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
        free(p->lanes);
        free(p);
    }
    net->pins = NULL;
}
