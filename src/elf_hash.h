/* Floor: base. The hashes of an ELF object's symbol tables, as the dynamic
 * loader computes them: GNU's (DT_GNU_HASH) and System V's (DT_HASH). For
 * dynsym.c's lookups in the loaded objects, and regionalloc run's in a
 * program's file (tools/python_elf.c), which compiles this in too. */
#ifndef RA_ELF_HASH_H
#define RA_ELF_HASH_H

#include <stdint.h>

static inline uint32_t ra__elf_gnu_hash(const char *name)
{
    uint32_t h = 5381;

    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = h * 33 + *c;
    return h;
}

static inline uint32_t ra__elf_sysv_hash(const char *name)
{
    uint32_t h = 0;

    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        uint32_t high;
        h = (h << 4) + *c;
        high = h & 0xf0000000u;
        h ^= high >> 24;
        h &= ~high;
    }
    return h;
}

#endif /* RA_ELF_HASH_H */
