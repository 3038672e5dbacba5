/* Floor: services. profile.proto's string table, for the pprof encoder:
 * each string encoded once, as it is first used, and found again by hash
 * (open addressing, at most half full). */
#include <string.h>

#include "prof_pprof.h"

/* Profile.string_table's field number (profile.proto). */
#define PROFILE_STRING_TABLE 6


static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static bool strings_grow(struct ra__prof_strings *st)
{
    size_t cap = st->cap == 0 ? 256 : st->cap * 2, nslots = cap * 2;
    size_t *at = ra__meta_realloc(st->at, cap * sizeof *at);
    size_t *len, *slots;

    if (at == NULL)
        return true;
    st->at = at;
    len = ra__meta_realloc(st->len, cap * sizeof *len);
    if (len == NULL)
        return true;
    st->len = len;
    slots = ra__meta_calloc(nslots, sizeof *slots);
    if (slots == NULL)
        return true;
    for (size_t i = 0; i < st->count; i++) {
        size_t j = hash_bytes((const char *)st->enc.data + st->at[i],
                              st->len[i]) &
                   (nslots - 1);
        while (slots[j] != 0)
            j = (j + 1) & (nslots - 1);
        slots[j] = i + 1;
    }
    ra__meta_free(st->slots);
    st->slots = slots;
    st->nslots = nslots;
    st->cap = cap;
    return false;
}

uint64_t ra__prof_intern_bytes(struct ra__prof_strings *st, const char *s,
                               size_t n)
{
    size_t j;

    if (st->enc.failed)
        return 0;
    if (st->count == st->cap && strings_grow(st)) {
        st->enc.failed = true;
        return 0;
    }
    j = hash_bytes(s, n) & (st->nslots - 1);
    for (; st->slots[j] != 0; j = (j + 1) & (st->nslots - 1)) {
        size_t i = st->slots[j] - 1;
        if (st->len[i] == n && st->enc.data != NULL &&
            memcmp(st->enc.data + st->at[i], s, n) == 0)
            return i;
    }
    ra__pb_bytes(&st->enc, PROFILE_STRING_TABLE, s, n);
    if (st->enc.failed)
        return 0;
    st->at[st->count] = st->enc.len - n;
    st->len[st->count] = n;
    st->slots[j] = st->count + 1;
    return st->count++;
}

uint64_t ra__prof_intern(struct ra__prof_strings *st, const char *s)
{
    return ra__prof_intern_bytes(st, s, strlen(s));
}

void ra__prof_strings_free(struct ra__prof_strings *st)
{
    ra__pb_free(&st->enc);
    ra__meta_free(st->at);
    ra__meta_free(st->len);
    ra__meta_free(st->slots);
}
