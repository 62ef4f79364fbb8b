// What dp-bench's raw baselines call directly: libsodium, and a spin-wait hint. The library's own C edges
// (CSodium, CShims) are internal to it; this module is the benchmark package's, with its own name.
#include <sodium.h>

/// Tells the CPU that a thread is spinning (x86 `pause`, Arm `yield`), as the sealing threads do while the ring is full.
static inline void baseline_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
