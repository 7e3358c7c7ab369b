/*
 * cw-verbs-fake.so: the fake verbs device as a module of its own, built
 * for the tests and never installed.  na-verbs loads it only when
 * CAUSEWAY_VERBS_FAKE names its path (vb_ops_load.c); this is its one
 * exported symbol.
 */
#include "fake.h"

__attribute__((visibility(
    "default"))) extern const struct vb_fake_module vb_fake_module_entry;

const struct vb_fake_module vb_fake_module_entry = {
    .abi = VB_FAKE_ABI,
    .ops_size = sizeof(struct vb_ops),
    .ops = &vb_fake_ops,
    .stats_get = fake_stats_get,
};
