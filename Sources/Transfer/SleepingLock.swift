#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A lock around a value that puts a waiting thread to sleep at once,
/// for state that many threads touch briefly (a batch's counters, the writer
/// pool's queue).
///
/// `Synchronization.Mutex` on Linux spins 500 times (`pause`, some 20 µs)
/// before it sleeps on a priority-inheriting futex. On a machine with fewer
/// cores than busy threads the holder is often off its core, so the spin
/// only burns the time the holder needs: in a profile of 2000 small files
/// on two cores, 4% of all samples were threads spinning on one batch's
/// lock. This is a plain `pthread_mutex_t` (glibc's default kind: no spin,
/// a futex wait when taken), which hands the core back at once.
///
/// `@unchecked Sendable`: `value` is only reached inside `withLock`, under the mutex.
public final class SleepingLock<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// A lock guarding `value`. `sending`, as `Mutex` asks: the value is
    /// reached from other threads from now on, so no other reference to it
    /// may stay behind.
    public init(_ value: sending Value) {
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        self.value.initialize(to: value)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with the value while holding the lock, and returns what it returns.
    @inlinable
    public func withLock<Result, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
