// tests/test_by_library.sh's C++ library (libbylib_cxx.so, in the
// program's DT_NEEDED): known live bytes through operator new, whose
// throwing, nothrow and aligned forms each capture their caller.
#include <cstddef>
#include <new>

// Seen from outside, so that the compiler keeps the allocations.
extern "C" {
void *cxx_held[3];
}

// 20480 + 40960 + 512 bytes.
extern "C" void cxx_hold()
{
    cxx_held[0] = new char[20480];
    cxx_held[1] = ::operator new(40960, std::nothrow);
    cxx_held[2] = new (std::align_val_t(256)) char[512];
}

// One block of n bytes, by this library's operator new.
extern "C" void *cxx_extra(std::size_t n)
{
    return ::operator new(n);
}
