/*
 * Deliberately broken plugin modules for the loader tests, one per
 * BAD_KIND: wrong ABI version, ops table larger than this core knows,
 * missing mandatory op, half an RMA group, invalid name, no entry symbol;
 * and one good one (7): a plugin built against the first ABI-1 ops table,
 * which ended before mem_restrict.  Never loaded outside tests.
 */
#include <causeway/na_plugin.h>

#include <stddef.h>

__attribute__((unused)) static cw_status_t
bad_init(const struct cw_na_host *host, const struct cw_na_init_info *info,
         cw_na_class_t **cls_p)
{
    return CW_UNSUPPORTED;
}

#if BAD_KIND != 6
/* Every mandatory op present (never called), except for BAD_KIND 3. */
#define ANY (void *)bad_init
static const struct cw_na_ops bad_ops = {
    .init = bad_init,
#if BAD_KIND != 3
    .finalize = ANY,
    .query = ANY,
    .addr_lookup = ANY,
    .addr_self = ANY,
    .addr_dup = ANY,
    .addr_free = ANY,
    .addr_cmp = ANY,
    .addr_to_string = ANY,
    .addr_serialize_size = ANY,
    .addr_serialize = ANY,
    .addr_deserialize = ANY,
    .msg_send_unexpected = ANY,
    .msg_recv_unexpected = ANY,
    .msg_send_expected = ANY,
    .msg_recv_expected = ANY,
    .progress = ANY,
    .cancel = ANY,
#endif
#if BAD_KIND == 4
    .put = ANY,
#endif
};

CW_NA_EXPORT const struct cw_na_plugin cw_na_plugin_entry = {
#if BAD_KIND == 1
    .abi_version = CW_NA_ABI_VERSION + 100,
#else
    .abi_version = CW_NA_ABI_VERSION,
#endif
#if BAD_KIND == 2
    .ops_size = sizeof(struct cw_na_ops) + 8,
#elif BAD_KIND == 7
    .ops_size = offsetof(struct cw_na_ops, mem_restrict),
#else
    .ops_size = sizeof(struct cw_na_ops),
#endif
#if BAD_KIND == 5
    .name = "Bad Name",
#elif BAD_KIND == 7
    .name = "oldabi",
#else
    .name = "bad",
#endif
    .description = "broken on purpose",
    .ops = &bad_ops,
};
#else
CW_NA_EXPORT const int cw_na_not_the_entry = 1;
#endif
