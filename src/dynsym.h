/* Floor: backend. dynsym.c: the dynamic symbol tables of the loaded objects,
 * read in place without allocating or locking (jemalloc_lookup.c finds
 * jemalloc's own functions with it, override.c what the program's malloc
 * calls reach). */
#ifndef RA_DYNSYM_H
#define RA_DYNSYM_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

/* The dynamic symbol table of one loaded object. */
struct ra__dynsym {
    uintptr_t base;
    const Elf64_Sym *symtab;
    const char *strtab;
    const uint32_t *gnu_hash;
    const Elf64_Word *sysv_hash;
};

/* Reads the table of the object info describes (a dl_iterate_phdr entry).
 * Returns true when it has none that can be searched. */
bool ra__dynsym_open(struct ra__dynsym *d, const struct dl_phdr_info *info);
/* The address of the object's own definition of the function name (an
 * undefined symbol is none, even with a value), or NULL. */
void *ra__dynsym_find(const struct ra__dynsym *d, const char *name);
/* The definition of the function name that the program's calls reach: the
 * first in the global scope's order (dynsym.c), or NULL. */
void *ra__dynsym_first_definition(const char *name);
/* The definition of name after the caller's object's (dlsym's RTLD_NEXT:
 * the C library's function that one of ours stands in front of), looked up
 * once into *cache; NULL if there is none. */
void *ra__dynsym_next(void *volatile *cache, const char *name);

/* dlclose of handle, as the C library's, between two bumps of
 * ra__dl_generation (tags by calling object: an object unloaded may leave
 * its addresses to the next one loaded): before, for what its code cached
 * before it was asked to go, and after, for what its destructors cached
 * while it went. The library's own unloads come here too. */
extern _Atomic unsigned ra__dl_generation;
int ra__dynsym_dlclose(void *handle);

#endif /* RA_DYNSYM_H */
