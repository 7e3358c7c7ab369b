/* The keyed hash table and SipHash (util/): reference vectors, the
 * process key, resizing, use order, a bounded cache, removal while
 * iterating, 10^5 keys, and keys made to collide under one key spread
 * under another (cmocka). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cw_htable.h"

struct ent {
    struct cw_hnode node;
    unsigned val;
    char key[24];
};

static struct ent *ent_new(unsigned v)
{
    struct ent *e = calloc(1, sizeof(*e));

    assert_non_null(e);
    e->val = v;
    snprintf(e->key, sizeof(e->key), "key-%u", v);
    return e;
}

static struct ent *find(struct cw_htable *t, unsigned v)
{
    char k[24];
    struct cw_hnode *n;

    snprintf(k, sizeof(k), "key-%u", v);
    n = cw_htable_find_str(t, k);
    return n ? CW_HNODE_ENTRY(n, struct ent, node) : NULL;
}

static void empty(struct cw_htable *t)
{
    struct cw_hnode *n;

    while ((n = cw_htable_oldest(t)) != NULL) {
        cw_htable_remove(t, n);
        free(CW_HNODE_ENTRY(n, struct ent, node));
    }
    cw_htable_fini(t);
}

/* The longest bucket chain. */
static size_t max_chain(const struct cw_htable *t)
{
    size_t m = 0;

    for (size_t i = 0; i < t->nbuckets; i++) {
        size_t c = 0;
        for (const struct cw_hnode *n = t->buckets[i]; n; n = n->hnext)
            c++;
        if (c > m)
            m = c;
    }
    return m;
}

static const uint8_t key_a[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                  8, 9, 10, 11, 12, 13, 14, 15};
static const uint8_t key_b[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2,  3,  4,
                                  5,    6,    7,    8,    9, 10, 11, 12};

/* Runs first: the process key can be fixed before anything hashed, and
 * never changes afterwards. */
static void test_seed_fixed_once(void **state)
{
    uint8_t k[16], k2[16];

    (void)state;
    assert_true(cw_siphash_seed_set(key_b));
    cw_siphash_seed_get(k);
    assert_memory_equal(k, key_b, 16);
    assert_false(cw_siphash_seed_set(key_a));
    cw_siphash_seed_get(k2);
    assert_memory_equal(k2, key_b, 16);
    assert_int_equal(cw_siphash_str("abc"), cw_siphash_13(key_b, "abc", 3));
}

/* The reference implementation's vectors (key 00..0f, message 00..n-1). */
static void test_siphash_vectors(void **state)
{
    uint8_t msg[64];

    (void)state;
    for (unsigned i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)i;
    assert_int_equal(cw_siphash_24(key_a, msg, 0), 0x726fdb47dd0e0e31ull);
    assert_int_equal(cw_siphash_24(key_a, msg, 1), 0x74f839c593dc67fdull);
    assert_int_equal(cw_siphash_24(key_a, msg, 8), 0x93f5f5799a932462ull);
    assert_int_equal(cw_siphash_24(key_a, msg, 15), 0xa129ca6149be45e5ull);
    assert_int_equal(cw_siphash_24(key_a, msg, 63), 0x958a324ceb064572ull);
}

/* SipHash-1-3 under the all-zero key, as other implementations give it
 * ("" -> d1fba762150c532c, "siphash" -> 8264ceeccb16bcbe). */
static void test_siphash13_vectors(void **state)
{
    const uint8_t zero[16] = {0};
    struct cw_htable t = {0};

    (void)state;
    assert_int_equal(cw_siphash_13(zero, "", 0), 0xd1fba762150c532cull);
    assert_int_equal(cw_siphash_13(zero, "siphash", 7), 0x8264ceeccb16bcbeull);
    /* The tables hash with it, under their key. */
    cw_htable_set_key(&t, key_a);
    assert_int_equal(cw_htable_hash(&t, "abc", 3),
                     cw_siphash_13(key_a, "abc", 3));
    assert_true(cw_siphash_13(key_a, "abc", 3) !=
                cw_siphash_24(key_a, "abc", 3));
}

/* Another key gives other hashes; the same key the same ones. */
static void test_seed_changes_hash(void **state)
{
    struct cw_htable a = {0}, b = {0}, a2 = {0};
    unsigned same = 0;
    char k[24];

    (void)state;
    cw_htable_set_key(&a, key_a);
    cw_htable_set_key(&a2, key_a);
    cw_htable_set_key(&b, key_b);
    for (unsigned i = 0; i < 1000; i++) {
        int n = snprintf(k, sizeof(k), "peer-%u", i);
        uint64_t ha = cw_htable_hash(&a, k, (size_t)n);
        assert_int_equal(ha, cw_htable_hash(&a2, k, (size_t)n));
        if (ha == cw_htable_hash(&b, k, (size_t)n))
            same++;
    }
    assert_int_equal(same, 0);
}

/* The table grows with its entries (load at most 3/4) and shrinks when
 * they go; every key is found throughout. */
static void test_resize(void **state)
{
    struct cw_htable t = {0};
    size_t grown;

    (void)state;
    for (unsigned i = 0; i < 1000; i++) {
        struct ent *e = ent_new(i);
        assert_int_equal(cw_htable_insert_str(&t, &e->node, e->key), CW_OK);
        assert_true(cw_htable_count(&t) * 4 <= t.nbuckets * 3);
    }
    assert_int_equal(cw_htable_count(&t), 1000);
    assert_true(t.nbuckets >= 1024 && t.nbuckets <= 2048);
    grown = t.nbuckets;
    for (unsigned i = 0; i < 1000; i++)
        assert_int_equal(find(&t, i)->val, i);
    assert_null(find(&t, 1000));
    for (unsigned i = 0; i < 990; i++) {
        struct ent *e = find(&t, i);
        cw_htable_remove(&t, &e->node);
        free(e);
        assert_null(find(&t, i));
    }
    assert_int_equal(cw_htable_count(&t), 10);
    assert_true(t.nbuckets < grown && t.nbuckets <= 256);
    assert_true(t.resizes > 0);
    for (unsigned i = 990; i < 1000; i++)
        assert_int_equal(find(&t, i)->val, i);
    empty(&t);
    assert_int_equal(t.nbuckets, 0);
}

/* Oldest to newest: insertion order, a touched entry moves to the end. */
static void test_use_order(void **state)
{
    struct cw_htable t = {0};
    static const unsigned want[] = {1, 3, 4, 0, 2};
    struct cw_hnode *n;
    unsigned i = 0;

    (void)state;
    for (unsigned v = 0; v < 5; v++) {
        struct ent *e = ent_new(v);
        assert_int_equal(cw_htable_insert_str(&t, &e->node, e->key), CW_OK);
    }
    {
        /* The hashed variants are the same table operations. */
        struct ent *e = ent_new(5);
        uint64_t h = cw_htable_hash(&t, e->key, strlen(e->key));
        assert_null(cw_htable_find_hash(&t, e->key, strlen(e->key), h));
        assert_int_equal(
            cw_htable_insert_hash(&t, &e->node, e->key, strlen(e->key), h),
            CW_OK);
        assert_ptr_equal(find(&t, 5), e);
        assert_ptr_equal(cw_htable_find_hash(&t, "key-5", 5, h), &e->node);
        cw_htable_remove(&t, &e->node);
        free(e);
    }
    cw_htable_touch(&t, &find(&t, 0)->node);
    cw_htable_touch(&t, &find(&t, 2)->node);
    cw_htable_touch(&t, &find(&t, 2)->node); /* already newest */
    for (n = cw_htable_oldest(&t); n != NULL; n = cw_htable_newer(n))
        assert_int_equal(CW_HNODE_ENTRY(n, struct ent, node)->val, want[i++]);
    assert_int_equal(i, 5);
    empty(&t);
}

/* find_recent sees only the DEPTH newest entries (inserted or touched),
 * follows removals, and tells a key from another of the same length. */
static void test_find_recent(void **state)
{
    struct cw_htable t = {0};
    struct ent *e[4];

    (void)state;
    assert_null(cw_htable_find_recent(&t, "key-0", 5, 2));
    for (unsigned v = 0; v < 4; v++) {
        e[v] = ent_new(v);
        assert_int_equal(cw_htable_insert_str(&t, &e[v]->node, e[v]->key),
                         CW_OK);
    }
    assert_ptr_equal(cw_htable_find_recent(&t, "key-3", 5, 1), &e[3]->node);
    assert_null(cw_htable_find_recent(&t, "key-2", 5, 1));
    assert_ptr_equal(cw_htable_find_recent(&t, "key-2", 5, 2), &e[2]->node);
    assert_null(cw_htable_find_recent(&t, "key-1", 5, 2)); /* in the table */
    assert_non_null(find(&t, 1));
    assert_null(cw_htable_find_recent(&t, "key-9", 5, 4));
    assert_null(cw_htable_find_recent(&t, "key-3", 4, 4)); /* a prefix */
    cw_htable_touch(&t, &e[0]->node);
    assert_ptr_equal(cw_htable_find_recent(&t, "key-0", 5, 1), &e[0]->node);
    cw_htable_remove(&t, &e[0]->node);
    free(e[0]);
    assert_null(cw_htable_find_recent(&t, "key-0", 5, 4));
    assert_ptr_equal(cw_htable_find_recent(&t, "key-3", 5, 1), &e[3]->node);
    assert_null(cw_htable_find_recent(&t, "key-3", 5, 0));
    empty(&t);
}

/* A cache bounded the way the gateway bounds one: after each insert the
 * oldest go while over the bound.  It never holds more, the newest and
 * the ones kept in use stay. */
static void test_bounded_lru(void **state)
{
    struct cw_htable t = {0};
    const unsigned bound = 100;
    struct ent *hot;

    (void)state;
    hot = ent_new(1u << 30);
    assert_int_equal(cw_htable_insert_str(&t, &hot->node, hot->key), CW_OK);
    for (unsigned v = 0; v < 10000; v++) {
        struct ent *e = ent_new(v);
        assert_int_equal(cw_htable_insert_str(&t, &e->node, e->key), CW_OK);
        cw_htable_touch(&t, &hot->node); /* used between any two misses */
        while (cw_htable_count(&t) > bound) {
            struct cw_hnode *n = cw_htable_oldest(&t);
            cw_htable_remove(&t, n);
            free(CW_HNODE_ENTRY(n, struct ent, node));
        }
        assert_true(cw_htable_count(&t) <= bound);
    }
    assert_int_equal(cw_htable_count(&t), bound);
    assert_non_null(find(&t, 1u << 30));
    for (unsigned v = 10000 - (bound - 1); v < 10000; v++)
        assert_non_null(find(&t, v));
    assert_null(find(&t, 10000 - bound));
    assert_true(t.nbuckets <= 256);
    empty(&t);
}

/* Removing the entry an iteration is at, having read the next one. */
static void test_remove_while_iterating(void **state)
{
    struct cw_htable t = {0};
    struct cw_hnode *n, *next;
    unsigned left = 0;

    (void)state;
    for (unsigned v = 0; v < 1000; v++) {
        struct ent *e = ent_new(v);
        assert_int_equal(cw_htable_insert_str(&t, &e->node, e->key), CW_OK);
    }
    for (n = cw_htable_oldest(&t); n != NULL; n = next) {
        struct ent *e = CW_HNODE_ENTRY(n, struct ent, node);
        next = cw_htable_newer(n);
        if (e->val % 2 == 0) {
            cw_htable_remove(&t, n);
            free(e);
        }
    }
    assert_int_equal(cw_htable_count(&t), 500);
    for (n = cw_htable_oldest(&t); n != NULL; n = cw_htable_newer(n)) {
        assert_int_equal(CW_HNODE_ENTRY(n, struct ent, node)->val % 2, 1);
        left++;
    }
    assert_int_equal(left, 500);
    for (unsigned v = 0; v < 1000; v++)
        assert_true((find(&t, v) != NULL) == (v % 2 == 1));
    empty(&t);
}

/* 10^5 keys: all found, short chains. */
static void test_many_keys(void **state)
{
    struct cw_htable t = {0};
    const unsigned n = 100000;

    (void)state;
    for (unsigned v = 0; v < n; v++) {
        struct ent *e = ent_new(v);
        assert_int_equal(cw_htable_insert_str(&t, &e->node, e->key), CW_OK);
    }
    assert_int_equal(cw_htable_count(&t), n);
    assert_true(n * 4 <= t.nbuckets * 3);
    assert_true(max_chain(&t) <= 12);
    for (unsigned v = 0; v < n; v++)
        assert_int_equal(find(&t, v)->val, v);
    empty(&t);
}

/* Keys an attacker picked to share a bucket of a table keyed with key_a
 * (the same low hash bits) spread over a table keyed with key_b: a peer
 * that does not know the key cannot make chains. */
static void test_chosen_collisions(void **state)
{
    struct cw_htable ta = {0}, tb = {0};
    struct ent *e[256];
    unsigned found = 0;

    (void)state;
    cw_htable_set_key(&ta, key_a);
    cw_htable_set_key(&tb, key_b);
    for (unsigned v = 0; found < 256 && v < 10000000; v++) {
        char k[24];
        int len = snprintf(k, sizeof(k), "key-%u", v);
        if ((cw_htable_hash(&ta, k, (size_t)len) & 1023) == 0)
            e[found++] = ent_new(v);
    }
    assert_int_equal(found, 256);
    for (unsigned i = 0; i < found; i++) {
        struct ent *c = ent_new(e[i]->val);
        assert_int_equal(cw_htable_insert_str(&ta, &e[i]->node, e[i]->key),
                         CW_OK);
        assert_int_equal(cw_htable_insert_str(&tb, &c->node, c->key), CW_OK);
    }
    /* 512 buckets each: every chosen key in one bucket under key_a. */
    assert_int_equal(max_chain(&ta), 256);
    assert_true(max_chain(&tb) <= 8);
    empty(&ta);
    empty(&tb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_fixed_once),
        cmocka_unit_test(test_siphash_vectors),
        cmocka_unit_test(test_siphash13_vectors),
        cmocka_unit_test(test_seed_changes_hash),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_use_order),
        cmocka_unit_test(test_find_recent),
        cmocka_unit_test(test_bounded_lru),
        cmocka_unit_test(test_remove_while_iterating),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_chosen_collisions),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
