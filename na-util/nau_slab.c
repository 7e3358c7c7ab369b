/* Slabs for queued unexpected messages (nau_slab.h). */
#include "nau_slab.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define NAU_SLAB_BYTES ((size_t)256 << 10)

#if defined(__SANITIZE_ADDRESS__)
#define NAU_SLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NAU_SLAB_ASAN 1
#endif
#endif
#ifdef NAU_SLAB_ASAN
#include <sanitizer/asan_interface.h>
#define NAU_REDZONE        16 /* poisoned after each record */
#define NAU_POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define NAU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define NAU_REDZONE        0
#define NAU_POISON(p, n)   ((void)(p), (void)(n))
#define NAU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct nau_slab {
    size_t used; /* bytes handed out, from mem */
    size_t live; /* records in it not freed yet */
    _Alignas(16) uint8_t mem[];
};

#define NAU_SLAB_ROOM (NAU_SLAB_BYTES - offsetof(struct nau_slab, mem))

static size_t nau_slab_round(size_t size)
{
    return (size + 15) & ~(size_t)15;
}

static void nau_slab_unmap(struct nau_slabs *ss, struct nau_slab *s)
{
    NAU_UNPOISON(s->mem, NAU_SLAB_ROOM); /* the next mapping there is new */
    munmap(s, NAU_SLAB_BYTES);
    ss->mapped -= NAU_SLAB_BYTES;
}

void *nau_slab_alloc(struct nau_slabs *ss, size_t size, size_t cap,
                     struct nau_slab **slab_p)
{
    struct nau_slab *s = ss->cur;
    void *p;

    size = nau_slab_round(size);
    if (size <= NAU_SLAB_ROOM / 8) {
        size_t take = size + NAU_REDZONE;

        if (s != NULL && s->used + take > NAU_SLAB_ROOM) {
            if (s->live == 0)
                s->used = 0; /* empty: fill it again */
            else
                s = NULL; /* unmapped when its last record is freed */
        }
        if (s == NULL && ss->mapped <= cap) {
            s = mmap(NULL, NAU_SLAB_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (s == MAP_FAILED) {
                s = NULL;
            } else {
                s->used = 0;
                s->live = 0;
                ss->mapped += NAU_SLAB_BYTES;
                NAU_POISON(s->mem, NAU_SLAB_ROOM);
            }
        }
        if (s != NULL) {
            ss->cur = s;
            p = s->mem + s->used;
            NAU_UNPOISON(p, size);
            s->used += take;
            s->live++;
            *slab_p = s;
            return p;
        }
        ss->cur = NULL;
    }
    *slab_p = NULL;
    return malloc(size);
}

void nau_slab_free(struct nau_slabs *ss, void *p, size_t size,
                   struct nau_slab *s)
{
    if (s == NULL) {
        free(p);
        return;
    }
    NAU_POISON(p, nau_slab_round(size));
    if (--s->live != 0)
        return;
    if (s == ss->cur) {
        s->used = 0; /* kept for the next ones */
        return;
    }
    nau_slab_unmap(ss, s);
}

size_t nau_slabs_fini(struct nau_slabs *ss)
{
    if (ss->cur != NULL) {
        if (ss->cur->live == 0)
            nau_slab_unmap(ss, ss->cur);
        ss->cur = NULL;
    }
    return ss->mapped;
}
