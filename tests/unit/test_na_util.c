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

/* Run first: the children draw their seeds before this process does. */
static void test_hash_seeding(void **state)
{
    uint64_t seeds[2], x = 0, keys[64];
    unsigned used[16] = {0}, nused = 0;

    for (int i = 0; i < 2; i++) {
        int fds[2], status;
        pid_t pid;

        assert_int_equal(pipe(fds), 0);
        if ((pid = fork()) == 0) {
            uint64_t s = nau_seed();
            _exit(write(fds[1], &s, sizeof(s)) == sizeof(s) ? 0 : 1);
        }
        close(fds[1]);
        assert_int_equal(read(fds[0], &seeds[i], 8), 8);
        close(fds[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_true(seeds[0] != seeds[1]); /* one per process */
    assert_true(nau_seed() != 0 && nau_seed() == nau_seed());

    /* Keys made to share a bucket under one seed spread under another. */
    for (int n = 0; n < 64; x++)
        if ((nau_hash_u64(1, x) & 15) == 0)
            keys[n++] = x;
    for (int i = 0; i < 64; i++)
        used[nau_hash_u64(2, keys[i]) & 15]++;
    for (int b = 0; b < 16; b++)
        nused += used[b] != 0;
    assert_true(nused >= 8);
    assert_true(nau_hash_bytes(1, "10.0.0.1:7000", 13) ==
                nau_hash_bytes(1, "10.0.0.1:7000", 13));
    assert_true(nau_hash_bytes(1, "10.0.0.1:7000", 13) !=
                nau_hash_bytes(2, "10.0.0.1:7000", 13));
    /* The wire's hash: FNV-1a's reference values, whatever the seed. */
    assert_true(nau_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(nau_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
}

static void test_list(void **state)
{
    struct nau_list h, n[3] = {{0}}, *l, *t;
    int i = 0;

    nau_list_init(&h);
    assert_true(nau_list_empty(&h));
    assert_false(nau_list_linked(&n[0])); /* zeroed: on no list */
    nau_list_del(&n[0]);                  /* deleting it: nothing */
    for (i = 0; i < 3; i++)
        nau_list_add_tail(&h, &n[i]);
    i = 0;
    nau_list_for_each(l, &h) assert_ptr_equal(l, &n[i++]);
    assert_int_equal(i, 3);
    nau_list_del(&n[1]);
    assert_false(nau_list_linked(&n[1]));
    nau_list_del(&n[1]); /* twice: nothing */
    assert_true(h.next->next == &n[2] && n[2].prev == &n[0]);
    nau_list_for_each_safe(l, t, &h) nau_list_del(l);
    assert_true(nau_list_empty(&h) && !nau_list_linked(&n[2]));
}

static void test_pool(void **state)
{
    struct nau_pool p = {0};
    void *a, *b, *c;

    /* A zeroed pool hands out nothing and frees what it is given. */
    assert_null(nau_pool_get(&p));
    nau_pool_put(&p, malloc(32));
    assert_int_equal(p.nfree, 0);

    nau_pool_init(&p, 64, 2);
    a = nau_pool_get(&p);
    b = nau_pool_get(&p);
    c = nau_pool_get(&p);
    assert_true(a && b && c);
    assert_int_equal(p.allocs, 3); /* grown from empty, one at a time */
    memset(a, 0xab, 64);
    nau_pool_put(&p, a);
    nau_pool_put(&p, b);
    nau_pool_put(&p, c); /* past max_free: freed (ASan: no leak) */
    nau_pool_put(&p, NULL);
    assert_int_equal(p.nfree, 2);
    assert_ptr_equal(nau_pool_get(&p), b); /* the last kept first */
    assert_ptr_equal(nau_pool_get(&p), a);
    assert_int_equal(p.allocs, 3); /* reused, not allocated */
    nau_pool_put(&p, a);
    nau_pool_put(&p, b);
    nau_pool_fini(&p); /* frees the kept ones (ASan: no leak) */
    assert_int_equal(p.nfree, 0);
    assert_null(p.free);
}

static void test_match(void **state)
{
    enum { N = 4096 };
    struct nau_match_entry e[6], *big = calloc(N, sizeof(*big));
    struct nau_match m;
    size_t longest = 0;

    assert_non_null(big);
    nau_match_init(&m, 4, 100, nau_seed());
    assert_null(nau_match_find(&m, 1, 7));
    assert_null(nau_match_oldest(&m));
    for (int i = 0; i < 4; i++)
        assert_int_equal(nau_match_insert(&m, &e[i], 1, 7, 10), CW_OK);
    assert_int_equal(m.bytes, 40);
    /* Full: refused with a status, counted, nothing kept. */
    assert_int_equal(nau_match_insert(&m, &e[4], 2, 7, 10), CW_BUSY);
    assert_int_equal(m.refused, 1);
    assert_int_equal(m.n, 4);
    assert_null(nau_match_find(&m, 2, 7));
    /* Evicting the oldest makes room; removing twice does nothing. */
    assert_ptr_equal(nau_match_oldest(&m), &e[0]);
    nau_match_remove(&m, &e[0]);
    nau_match_remove(&m, &e[0]);
    assert_int_equal(m.n, 3);
    /* The bytes bound: 30 held, 71 more would pass 100. */
    assert_int_equal(nau_match_insert(&m, &e[4], 2, 7, 71), CW_BUSY);
    assert_int_equal(m.refused, 2);
    assert_int_equal(nau_match_insert(&m, &e[4], 2, 7, 70), CW_OK);
    assert_int_equal(nau_match_insert(NULL, &e[5], 2, 7, 0), CW_INVALID_ARG);
    /* Per key oldest first; another peer's tag is not this peer's. */
    assert_ptr_equal(nau_match_find(&m, 1, 7), &e[1]);
    assert_ptr_equal(nau_match_next(&m, &e[1]), &e[2]);
    assert_null(nau_match_next(&m, &e[3]));
    assert_ptr_equal(nau_match_find(&m, 2, 7), &e[4]);
    assert_null(nau_match_find(&m, 1, 8));
    while (nau_match_oldest(&m) != NULL)
        nau_match_remove(&m, nau_match_oldest(&m));
    assert_true(m.n == 0 && m.bytes == 0);
    nau_match_fini(&m);

    /* Bound 0 refuses all; a full one of distinct keys has short buckets. */
    nau_match_init(&m, 0, 100, 1);
    assert_int_equal(nau_match_insert(&m, &e[0], 1, 1, 0), CW_BUSY);
    nau_match_fini(&m);
    nau_match_init(&m, N, SIZE_MAX, nau_seed());
    for (int i = 0; i < N; i++)
        assert_int_equal(nau_match_insert(&m, &big[i], i % 64, i, 0), CW_OK);
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
        assert_ptr_equal(nau_match_find(&m, i % 64, i), &big[i]);
        nau_match_remove(&m, &big[i]);
    }
    nau_match_fini(&m);
    free(big);
}

struct peer {
    struct nau_ptable_node node;
    uint64_t id;
};

/* Odd ids are keyed as bytes and compared, as addresses are; even ones
 * as 64-bit keys. */
static struct peer *find(struct nau_ptable *t, uint64_t id)
{
    struct nau_ptable_node *n = nau_ptable_find_u64(t, id);

    if (id % 2) {
        n = nau_ptable_first(t, nau_ptable_hash(t, &id, sizeof(id)));
        while (n && nau_container_of(n, struct peer, node)->id != id)
            n = nau_ptable_next(n);
    }
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
    assert_true(find(&t, 1) == NULL && find(&t, 2) == NULL);
    for (int i = 0; i < N; i++) {
        p[i].id = (uint64_t)i * 1000003u;
        if (i % 2)
            nau_ptable_insert(&t, &p[i].node, nau_ptable_hash(&t, &p[i].id, 8));
        else
            nau_ptable_insert_u64(&t, &p[i].node, p[i].id);
    }
    assert_int_equal(t.count, N);
    assert_int_equal(t.grows, 9); /* 16 buckets doubled to 8192 */
    for (int i = 0; i < N; i++)
        assert_ptr_equal(find(&t, p[i].id), &p[i]);
    assert_true(find(&t, 7) == NULL && find(&t, 8) == NULL);

    /* References: the last one says so. */
    nau_ptable_ref(&p[3].node);
    nau_ptable_ref(&p[3].node);
    assert_false(nau_ptable_unref(&p[3].node));
    assert_true(nau_ptable_unref(&p[3].node));

    /* Iterating while removing the even ones. */
    for (n = nau_ptable_iter(&t, NULL); n != NULL; n = next, seen++) {
        next = nau_ptable_iter(&t, n);
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
    const char *bad[] = {"21", "0", "12x", "", "-1", "99999999999999999999",
                         " 5", NULL};
    for (int i = 0; i < 8; i++)
        assert_int_equal(nau_param_uint(bad[i], 1, 20, &v), CW_INVALID_ARG);
    assert_int_equal(v, 17); /* written only on success */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_seeding), cmocka_unit_test(test_list),
        cmocka_unit_test(test_pool),         cmocka_unit_test(test_match),
        cmocka_unit_test(test_ptable),       cmocka_unit_test(test_param),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
