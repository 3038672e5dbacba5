/* Floor: backend. The dynamic symbol tables of the loaded objects, read in
 * place: which object defines a name, and where. Used before anything else
 * works (inside the first malloc, from other libraries' constructors), so
 * nothing here allocates or takes a lock of the library's. */
#include <elf.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "dynsym.h"
#include "elf_hash.h"
#include "internal.h"

/* glibc relocates the addresses of the dynamic section in place where it
 * is writable; elsewhere they are offsets from the object's base. */
static uintptr_t dynamic_address(uintptr_t base, Elf64_Addr value)
{
    return value < base ? base + value : value;
}

bool ra__dynsym_open(struct ra__dynsym *d, const struct dl_phdr_info *info)
{
    *d = (struct ra__dynsym){.base = info->dlpi_addr};
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const Elf64_Phdr *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_DYNAMIC)
            continue;
        for (const Elf64_Dyn *dyn =
                 (const Elf64_Dyn *)(info->dlpi_addr + ph->p_vaddr);
             dyn->d_tag != DT_NULL; dyn++) {
            uintptr_t addr = dynamic_address(d->base, dyn->d_un.d_ptr);
            switch (dyn->d_tag) {
            case DT_SYMTAB: d->symtab = (const Elf64_Sym *)addr; break;
            case DT_STRTAB: d->strtab = (const char *)addr; break;
            case DT_GNU_HASH: d->gnu_hash = (const uint32_t *)addr; break;
            case DT_HASH: d->sysv_hash = (const Elf64_Word *)addr; break;
            default: break;
            }
        }
        break;
    }
    return d->symtab == NULL || d->strtab == NULL ||
           (d->gnu_hash == NULL && d->sysv_hash == NULL);
}

/* A definition: not an undefined symbol, whatever its value. A non-PIE
 * executable that takes a function's address gives the undefined symbol
 * the address of a PLT stub of its own (a "canonical PLT entry"), and
 * dlsym returns that; calls still reach the first real definition. */
static bool is_definition_of(const struct ra__dynsym *d, uint32_t index,
                             const char *name)
{
    const Elf64_Sym *sym = &d->symtab[index];
    unsigned type = ELF64_ST_TYPE(sym->st_info);

    return sym->st_shndx != SHN_UNDEF && sym->st_value != 0 &&
           ELF64_ST_BIND(sym->st_info) != STB_LOCAL &&
           (type == STT_FUNC || type == STT_GNU_IFUNC) &&
           strcmp(d->strtab + sym->st_name, name) == 0;
}

/* The GNU hash table's lookup (the layout of binutils' and glibc's
 * dl-lookup.c): buckets of symbol indices, then a chain of hashes whose
 * low bit ends a bucket's run. */
static uint32_t gnu_lookup(const struct ra__dynsym *d, const char *name)
{
    const uint32_t *h = d->gnu_hash;
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
    const uint32_t *buckets =
        h + 4 + bloom_size * (sizeof(Elf64_Addr) / sizeof(uint32_t));
    const uint32_t *chain = buckets + nbuckets;
    uint32_t hash = ra__elf_gnu_hash(name), index;

    if (nbuckets == 0)
        return 0;
    index = buckets[hash % nbuckets];
    if (index < symoffset)
        return 0;
    for (;; index++) {
        uint32_t chained = chain[index - symoffset];
        if ((chained | 1) == (hash | 1) && is_definition_of(d, index, name))
            return index;
        if (chained & 1)
            return 0;
    }
}

static uint32_t sysv_lookup(const struct ra__dynsym *d, const char *name)
{
    const Elf64_Word *h = d->sysv_hash;
    Elf64_Word nbuckets = h[0], hash = ra__elf_sysv_hash(name);
    const Elf64_Word *buckets = h + 2, *chain = buckets + nbuckets;

    if (nbuckets == 0)
        return 0;
    for (Elf64_Word i = buckets[hash % nbuckets]; i != 0; i = chain[i])
        if (is_definition_of(d, i, name))
            return i;
    return 0;
}

void *ra__dynsym_find(const struct ra__dynsym *d, const char *name)
{
    uint32_t index = d->gnu_hash != NULL ? gnu_lookup(d, name)
                                         : sysv_lookup(d, name);

    return index == 0 ? NULL : (void *)(d->base + d->symtab[index].st_value);
}

struct first_definition {
    const char *name;
    void *found;
};

static int find_first_definition(struct dl_phdr_info *info, size_t size,
                                 void *ctx)
{
    struct first_definition *f = ctx;
    struct ra__dynsym d;

    (void)size;
    if (ra__dynsym_open(&d, info))
        return 0;
    f->found = ra__dynsym_find(&d, f->name);
    return f->found != NULL;
}

/* dl_iterate_phdr visits the objects in load order: the program, what is
 * preloaded, then the libraries it needs, breadth first, then what was
 * opened later. That is the order of the global scope in which the dynamic
 * linker binds the program's calls. */
void *ra__dynsym_first_definition(const char *name)
{
    struct first_definition f = {name, NULL};

    ra__assert_may_call_loader();
    dl_iterate_phdr(find_first_definition, &f);
    return f.found;
}

void *ra__dynsym_next(void *volatile *cache, const char *name)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

    if (fn == NULL) {
        ra__assert_may_call_loader();
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

_Atomic unsigned ra__dl_generation = 1;

int ra__dynsym_dlclose(void *handle)
{
    static void *volatile next;
    int (*real)(void *) = (int (*)(void *))ra__dynsym_next(&next, "dlclose");
    int rc;

    atomic_fetch_add_explicit(&ra__dl_generation, 1, memory_order_release);
    rc = real(handle);
    atomic_fetch_add_explicit(&ra__dl_generation, 1, memory_order_release);
    return rc;
}
