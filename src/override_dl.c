/* Floor: API. dlclose, which the library stands in front of for the tags
 * by calling object: an object unloaded may leave its addresses to the
 * next one loaded, and every thread's cache from return address to tag
 * must stop naming it (dynsym.c's ra__dynsym_dlclose). */
#include "dynsym.h"
#include "internal.h"

RA_EXPORT int dlclose(void *handle)
{
    return ra__dynsym_dlclose(handle);
}
