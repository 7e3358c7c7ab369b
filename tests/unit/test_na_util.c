/* na-util, the plugins' toolbox: list semantics, pool reuse, growth and
 * freeing, the matcher's bounds and order, hash seeding, the peer table's
 * growth and references, parameter parsing (cmocka). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "nau_hash.h"
#include "nau_list.h"
#include "nau_match.h"
#include "nau_param.h"
#include "nau_pool.h"
#include "nau_ptable.h"

/* First: the children must draw their seeds before this process does. */
static void test_seed_per_process(void **state)
{
    uint64_t seeds[2];

    for (int i = 0; i < 2; i++) {
        int fds[2];
        pid_t pid;
        int status;

        assert_int_equal(pipe(fds), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            uint64_t s = nau_seed();
            _exit(write(fds[1], &s, sizeof(s)) == sizeof(s) ? 0 : 1);
        }
        close(fds[1]);
        assert_int_equal(read(fds[0], &seeds[i], sizeof(seeds[i])),
                         sizeof(seeds[i]));
        close(fds[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_true(seeds[0] != seeds[1]);
    assert_true(nau_seed() != 0);
    assert_true(nau_seed() == nau_seed());
}

/* Keys made to share a bucket under one seed spread under another, and the
 * wire hash is FNV-1a's reference values whatever the seed. */
static void test_hash_seeding(void **state)
{
    enum { NB = 16, N = 64 };
    uint64_t keys[N], x = 0;
    unsigned used[NB] = {0}, nused = 0;
    const char s[] = "10.0.0.1:7000";

    for (int n = 0; n < N; x++)
        if ((nau_hash_u64(1, x) & (NB - 1)) == 0)
            keys[n++] = x;
    for (int i = 0; i < N; i++)
        used[nau_hash_u64(2, keys[i]) & (NB - 1)]++;
    for (int b = 0; b < NB; b++)
        nused += used[b] != 0;
    assert_true(nused >= NB / 2);
    assert_true(nau_hash_bytes(1, s, sizeof(s)) ==
                nau_hash_bytes(1, s, sizeof(s)));
    assert_true(nau_hash_bytes(1, s, sizeof(s)) !=
                nau_hash_bytes(2, s, sizeof(s)));
    assert_true(nau_hash_bytes(1, s, 5) != nau_hash_bytes(1, s, 6));
    assert_true(nau_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(nau_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
}

struct item {
    struct nau_list link;
    int v;
};

static void test_list(void **state)
{
    struct nau_list h, h2, *l, *tmp;
    struct item it[4] = {{.v = 0}, {.v = 1}, {.v = 2}, {.v = 3}};
    int want = 0;

    nau_list_init(&h);
    nau_list_init(&h2);
    assert_true(nau_list_empty(&h));
    assert_false(nau_list_linked(&it[0].link)); /* zeroed: on no list */
    nau_list_del(&it[0].link);                  /* and deleting: nothing */
    for (int i = 0; i < 3; i++)
        nau_list_add_tail(&h, &it[i].link);
    nau_list_add_tail(&h2, &it[3].link);
    nau_list_for_each(l, &h)
    {
        assert_int_equal(nau_container_of(l, struct item, link)->v, want++);
    }
    nau_list_del(&it[1].link);
    assert_false(nau_list_linked(&it[1].link));
    nau_list_del(&it[1].link); /* twice: still nothing */
    assert_ptr_equal(h.next->next, &it[2].link);
    nau_list_splice_tail(&h, &h2);
    assert_true(nau_list_empty(&h2));
    assert_ptr_equal(h.prev, &it[3].link);
    nau_list_for_each_safe(l, tmp, &h) nau_list_del(l);
    assert_true(nau_list_empty(&h));
}

static void test_pool(void **state)
{
    struct nau_pool p = {0};
    void *a, *b, *c;

    /* A zeroed pool hands out nothing and frees what it is given. */
    assert_null(nau_pool_get(&p));
    nau_pool_put(&p, malloc(32));
    assert_int_equal(p.nfree, 0);
    assert_int_equal(nau_pool_init(&p, 2, 2), CW_INVALID_ARG);
    assert_int_equal(nau_pool_init(&p, 64, 2), CW_OK);

    a = nau_pool_get(&p);
    b = nau_pool_get(&p);
    c = nau_pool_get(&p);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal(p.allocs, 3); /* grown from empty, one at a time */
    memset(a, 0xab, 64);
    nau_pool_put(&p, a);
    nau_pool_put(&p, b);
    nau_pool_put(&p, c); /* past max_free: freed (ASan: no leak) */
    nau_pool_put(&p, NULL);
    assert_int_equal(p.nfree, 2);
    assert_ptr_equal(nau_pool_get(&p), b); /* the last kept comes first */
    assert_ptr_equal(nau_pool_get(&p), a);
    assert_int_equal(p.allocs, 3); /* reused, not allocated */
    nau_pool_put(&p, a);
    nau_pool_put(&p, b);
    nau_pool_fini(&p);
    assert_int_equal(p.nfree, 0);
    assert_null(p.free);
}

struct msg {
    struct nau_match_entry m;
    int v;
};

static void test_match_bounds(void **state)
{
    struct nau_match m;
    struct msg e[6];

    memset(e, 0, sizeof(e));
    nau_match_init(&m, 4, 100, nau_seed());
    assert_null(nau_match_find(&m, 1, 1));
    assert_null(nau_match_oldest(&m));
    for (int i = 0; i < 4; i++)
        assert_int_equal(nau_match_insert(&m, &e[i].m, 1, 7, 10), CW_OK);
    assert_int_equal(m.n, 4);
    assert_int_equal(m.bytes, 40);
    /* Full: refused with a status, counted, nothing kept. */
    assert_int_equal(nau_match_insert(&m, &e[4].m, 2, 7, 10), CW_BUSY);
    assert_int_equal(m.refused, 1);
    assert_int_equal(m.n, 4);
    assert_null(nau_match_find(&m, 2, 7));
    /* Evict the oldest to make room. */
    assert_ptr_equal(nau_match_oldest(&m), &e[0].m);
    nau_match_remove(&m, nau_match_oldest(&m));
    nau_match_remove(&m, &e[0].m); /* removed already: nothing */
    assert_int_equal(m.n, 3);
    /* Bytes bound: 30 held, 71 more would pass 100. */
    assert_int_equal(nau_match_insert(&m, &e[4].m, 2, 7, 71), CW_BUSY);
    assert_int_equal(m.refused, 2);
    assert_int_equal(nau_match_insert(&m, &e[4].m, 2, 7, 70), CW_OK);
    assert_int_equal(m.bytes, 100);
    assert_int_equal(nau_match_insert(NULL, &e[5].m, 2, 7, 0), CW_INVALID_ARG);
    /* Per key, oldest first; another peer's tag is not this peer's. */
    assert_ptr_equal(nau_match_find(&m, 1, 7), &e[1].m);
    assert_ptr_equal(nau_match_next(&m, &e[1].m), &e[2].m);
    assert_ptr_equal(nau_match_next(&m, &e[3].m), NULL);
    assert_ptr_equal(nau_match_find(&m, 2, 7), &e[4].m);
    assert_null(nau_match_find(&m, 1, 8));
    while (nau_match_oldest(&m) != NULL)
        nau_match_remove(&m, nau_match_oldest(&m));
    assert_int_equal(m.n, 0);
    assert_int_equal(m.bytes, 0);
    nau_match_fini(&m);

    /* Bound 0: everything refused. */
    nau_match_init(&m, 0, 100, 1);
    assert_int_equal(nau_match_insert(&m, &e[0].m, 1, 1, 0), CW_BUSY);
    nau_match_fini(&m);
}

/* A full matcher of distinct keys: each found, no bucket long. */
static void test_match_index(void **state)
{
    enum { N = 4096 };
    struct msg *e = calloc(N, sizeof(*e));
    struct nau_match m;
    size_t longest = 0;

    assert_non_null(e);
    nau_match_init(&m, N, SIZE_MAX, nau_seed());
    for (int i = 0; i < N; i++) {
        e[i].v = i;
        assert_int_equal(
            nau_match_insert(&m, &e[i].m, (uint64_t)i % 64, (uint32_t)i, 0),
            CW_OK);
    }
    for (size_t b = 0; b <= m.mask; b++) {
        size_t len = 0;
        struct nau_list *l;

        nau_list_for_each(l, &m.buckets[b]) len++;
        longest = len > longest ? len : longest;
    }
    print_message("# %d entries, %zu buckets, longest %zu\n", N, m.mask + 1,
                  longest);
    assert_true(longest <= 32);
    for (int i = 0; i < N; i++) {
        struct nau_match_entry *f =
            nau_match_find(&m, (uint64_t)i % 64, (uint32_t)i);
        assert_ptr_equal(f, &e[i].m);
        nau_match_remove(&m, f);
    }
    assert_int_equal(m.n, 0);
    nau_match_fini(&m);
    free(e);
}

struct peer {
    struct nau_ptable_node node;
    uint64_t id;
};

/* Keys compared: how a plugin finds a peer by its address. */
static struct peer *ptable_find(struct nau_ptable *t, uint64_t id)
{
    uint64_t h = nau_ptable_hash(t, &id, sizeof(id));

    for (struct nau_ptable_node *n = nau_ptable_first(t, h); n != NULL;
         n = nau_ptable_next(n))
        if (nau_container_of(n, struct peer, node)->id == id)
            return nau_container_of(n, struct peer, node);
    return NULL;
}

/* Odd ids keyed as bytes, even ones as 64-bit keys. */
static struct peer *find(struct nau_ptable *t, uint64_t id)
{
    struct nau_ptable_node *n;

    if (id % 2)
        return ptable_find(t, id);
    n = nau_ptable_find_u64(t, id);
    return n ? nau_container_of(n, struct peer, node) : NULL;
}

static void test_ptable(void **state)
{
    enum { N = 5000 };
    struct peer *p = calloc(N, sizeof(*p));
    struct nau_ptable t;
    struct nau_ptable_node *n, *next;
    size_t seen = 0;

    assert_non_null(p);
    assert_int_equal(nau_ptable_init(&t, nau_seed()), CW_OK);
    assert_null(find(&t, 1));
    assert_null(find(&t, 2));
    for (int i = 0; i < N; i++) {
        p[i].id = (uint64_t)i * 1000003u;
        p[i].node.refs = 1;
        if (i % 2)
            nau_ptable_insert(&t, &p[i].node,
                              nau_ptable_hash(&t, &p[i].id, sizeof(p[i].id)));
        else
            nau_ptable_insert_u64(&t, &p[i].node, p[i].id);
    }
    assert_int_equal(t.count, N);
    assert_true(t.grows >= 8); /* 16 buckets doubled to 8192 */
    assert_true(t.mask + 1 >= N);
    for (int i = 0; i < N; i++)
        assert_ptr_equal(find(&t, p[i].id), &p[i]);
    assert_null(find(&t, 7));
    assert_null(find(&t, 8));

    /* References: the last one says so. */
    nau_ptable_ref(&p[3].node);
    assert_false(nau_ptable_unref(&p[3].node));
    assert_true(nau_ptable_unref(&p[3].node));

    /* Iterating while removing every other peer. */
    for (n = nau_ptable_iter(&t, NULL); n != NULL; n = next) {
        next = nau_ptable_iter(&t, n);
        seen++;
        if (nau_container_of(n, struct peer, node)->id % 2 == 0)
            nau_ptable_remove(&t, n);
    }
    assert_int_equal(seen, N);
    assert_int_equal(t.count, N / 2);
    nau_ptable_remove(&t, &p[0].node); /* removed already: nothing */
    assert_int_equal(t.count, N / 2);
    assert_null(find(&t, p[2].id));
    assert_ptr_equal(find(&t, p[1].id), &p[1]);
    for (seen = 0, n = nau_ptable_iter(&t, NULL); n; n = nau_ptable_iter(&t, n))
        seen++;
    assert_int_equal(seen, N / 2);
    nau_ptable_fini(&t);
    free(p);
}

static void test_param(void **state)
{
    const char *const params[] = {"a", "1", "b", "2", "a", "3", NULL};
    uint64_t v = 42;

    assert_string_equal(nau_param(params, "a", NULL), "3"); /* last wins */
    assert_null(nau_param(params, "c", NULL));
    assert_null(nau_param(NULL, "c", NULL));
    setenv("NAU_TEST_C", "9", 1);
    assert_string_equal(nau_param(params, "c", "NAU_TEST_C"), "9");
    assert_string_equal(nau_param(params, "b", "NAU_TEST_C"), "2");

    assert_int_equal(nau_param_uint("17", 1, 20, &v), CW_OK);
    assert_int_equal(v, 17);
    assert_int_equal(nau_param_uint("21", 1, 20, &v), CW_INVALID_ARG);
    assert_int_equal(nau_param_uint("0", 1, 20, &v), CW_INVALID_ARG);
    assert_int_equal(nau_param_uint("12x", 1, 20, &v), CW_INVALID_ARG);
    assert_int_equal(nau_param_uint("", 0, 20, &v), CW_INVALID_ARG);
    assert_int_equal(nau_param_uint("-1", 0, UINT64_MAX, &v), CW_INVALID_ARG);
    assert_int_equal(nau_param_uint("99999999999999999999", 0, UINT64_MAX, &v),
                     CW_INVALID_ARG);
    assert_int_equal(nau_param_uint(NULL, 0, 20, &v), CW_INVALID_ARG);
    assert_int_equal(v, 17); /* written only on success */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_per_process),
        cmocka_unit_test(test_hash_seeding),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_match_bounds),
        cmocka_unit_test(test_match_index),
        cmocka_unit_test(test_ptable),
        cmocka_unit_test(test_param),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
