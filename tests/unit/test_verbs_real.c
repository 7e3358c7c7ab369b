/*
 * na-verbs on real RDMA hardware.  Runs only when rdma-core lists a device
 * (what `ibv_devices` shows); otherwise it is skipped (exit 77) with a
 * message saying that no RDMA device is present.  With a device it opens
 * two instances on it ("verbs://" picks the first active device and an
 * IPv4 address on it) and checks a message, an expected reply, and a put
 * and a get between them, and that the plugin really used rdma-core.
 */
#include <causeway/log.h>
#include <causeway/na.h>

#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_NS 10000000000ull

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            printf("not ok - %s (%s:%d)\n", #c, __FILE__, __LINE__);           \
            fails++;                                                           \
            goto out;                                                          \
        }                                                                      \
    } while (0)

struct done {
    int calls;
    cw_status_t status;
    cw_na_addr_t *source;
};

static void done_cb(const struct cw_na_cb_info *info)
{
    struct done *d = info->arg;
    d->calls++;
    d->status = info->status;
    if (info->type == CW_NA_OP_RECV_UNEXPECTED)
        d->source = info->u.recv_unexpected.source;
}

static bool wait2(cw_na_t *a, cw_na_t *b, struct done *x, struct done *y)
{
    uint64_t end = cw_now_ns() + WAIT_NS;
    while ((x->calls == 0 || (y && y->calls == 0)) && cw_now_ns() < end) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
    }
    return x->calls == 1 && (!y || y->calls == 1);
}

int main(void)
{
    int n = 0;
    struct ibv_device **devs = ibv_get_device_list(&n);
    cw_na_t *a = NULL, *b = NULL;
    cw_na_addr_t *self = NULL, *b_at_a = NULL;
    cw_na_mem_t *ma = NULL, *mb = NULL, *rb = NULL;
    char uri[256];
    static char bufa[1 << 20], bufb[1 << 20];
    uint8_t ser[256];

    if (!devs || n == 0) {
        printf("1..0 # SKIP no RDMA device present (ibv_get_device_list: "
               "%s); na-verbs real-hardware tests need one\n",
               devs ? "no devices" : strerror(errno));
        if (devs)
            ibv_free_device_list(devs);
        return 77;
    }
    printf("# %d RDMA device(s), first %s\n", n, ibv_get_device_name(devs[0]));
    ibv_free_device_list(devs);
    if (getenv("CAUSEWAY_VERBS_FAKE")) {
        printf("1..0 # SKIP CAUSEWAY_VERBS_FAKE is set\n");
        return 77;
    }
    printf("1..1\n");
    CHECK(cw_na_open("verbs://", CW_NA_LISTEN, NULL, &a) == CW_OK);
    CHECK(cw_na_open("verbs://", CW_NA_LISTEN, NULL, &b) == CW_OK);
    CHECK(cw_na_addr_self(b, &self) == CW_OK);
    CHECK(cw_na_addr_to_string(b, self, uri, sizeof(uri)) == CW_OK);
    printf("# b is %s\n", uri);
    CHECK(strstr(uri, "fake") == NULL);
    CHECK(cw_na_addr_lookup(a, uri, &b_at_a) == CW_OK);
    {
        struct done r = {0}, s = {0};
        char in[64], out[] = "over real verbs";
        CHECK(cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL) ==
              CW_OK);
        CHECK(cw_na_msg_send_unexpected(a, out, sizeof(out), b_at_a, 1, done_cb,
                                        &s, NULL) == CW_OK);
        CHECK(wait2(a, b, &r, &s));
        CHECK(r.status == CW_OK && s.status == CW_OK);
        CHECK(strcmp(in, out) == 0);
        cw_na_addr_free(b, r.source);
    }
    {
        struct cw_na_segment sa = {bufa, sizeof(bufa)},
                             sb = {bufb, sizeof(bufb)};
        struct done p = {0}, g = {0};
        size_t len;
        memset(bufa, 0x11, sizeof(bufa));
        memset(bufb, 0x22, sizeof(bufb));
        CHECK(cw_na_mem_register(a, &sa, 1, 0, &ma) == CW_OK);
        CHECK(cw_na_mem_register(b, &sb, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE,
                                 &mb) == CW_OK);
        len = cw_na_mem_serialize_size(b, mb);
        CHECK(len <= sizeof(ser));
        CHECK(cw_na_mem_serialize(b, ser, len, mb) == CW_OK);
        CHECK(cw_na_mem_deserialize(a, ser, len, &rb) == CW_OK);
        CHECK(cw_na_get(a, ma, 0, rb, 4096, 65536, b_at_a, done_cb, &g, NULL) ==
              CW_OK);
        CHECK(wait2(a, b, &g, NULL) && g.status == CW_OK);
        CHECK(bufa[0] == 0x22 && bufa[65535] == 0x22 && bufa[65536] == 0x11);
        CHECK(cw_na_put(a, ma, 65536, rb, 0, 4096, b_at_a, done_cb, &p, NULL) ==
              CW_OK);
        CHECK(wait2(a, b, &p, NULL) && p.status == CW_OK);
        CHECK(bufb[0] == 0x11 && bufb[4095] == 0x11 && bufb[4096] == 0x22);
    }
    printf("ok 1 - message, get and put over %s\n", uri);
out:
    cw_na_mem_release(a, rb);
    cw_na_mem_release(a, ma);
    cw_na_mem_release(b, mb);
    cw_na_addr_free(a, b_at_a);
    cw_na_addr_free(b, self);
    cw_na_close(a);
    cw_na_close(b);
    return fails ? 1 : 0;
}
