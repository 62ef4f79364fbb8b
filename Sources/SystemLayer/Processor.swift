// What the chunk pipeline's helper threads ask of the CPU and the scheduler.
public import CShims  // for the @inlinable bodies (AtomicWord.swift says why public)

/// The processor as thread pools see it: how many CPUs this process may use, a spin-wait hint, a cheap clock.
public enum Processor {
    /// CPUs this process may run on (`sched_getaffinity`, else the online count); at least 1.
    public static func available() -> Int { Int(dp_available_cpus()) }

    /// A spin-wait hint for the CPU (x86 `pause`, arm64 `yield`).
    @inlinable @inline(__always)
    public static func relax() { dp_cpu_relax() }

    /// `CLOCK_MONOTONIC` in nanoseconds (a vDSO read: no system call).
    @inlinable @inline(__always)
    public static func monotonicNanoseconds() -> UInt64 { dp_monotonic_ns() }

    /// Names the calling thread (at most 15 bytes are kept; shown by ps, top and perf).
    public static func nameCurrentThread(_ name: String) { dp_set_thread_name(name) }
}
