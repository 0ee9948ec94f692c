import Dispatch

/// Buffers for body bytes on their way from the loop thread to the writers.
///
/// Chunks come in powers of two from 4 KiB to 256 KiB, sized to what a body
/// still has to send, so a 64 KiB photo takes a 64 KiB chunk rather than
/// 256 KiB, and four times as many small bodies fit in the same memory.
///
/// `take` hands out chunks while those in use stay within `byteBudget`, which
/// an engine raises to at least two of the largest chunks per transfer slot
/// (four for the first 16 slots: each running transfer holds the chunk it
/// is filling and those queued for its writer; with two, the loop thread
/// often waited for a writer), and returns nil past it rather than wait. A
/// writer that finds it spent uses `takeFromReserve` (see `HashingWriter`):
/// up to `reserve` bytes more, and past that it waits for a chunk to come
/// back. That wait cannot last: at most one chunk per slot is being filled,
/// so the rest of the budget is chunks queued to the writer threads, which
/// give them back without the loop thread's help.
/// Returned chunks are kept for reuse, up to `byteBudget` bytes, so their
/// pages stay warm; beyond that they are freed. Memory is thus bounded by
/// twice the budget plus the reserve, however many files pass through.
final class ChunkPool: Sendable {
    static let smallest = 4 << 10
    static let largest = 256 << 10

    /// Bytes of chunks that may be in use at once.
    var byteBudget: Int { state.withLock { $0.budget } }

    private struct State {
        var budget: Int
        var reserve: Int
        var bytesInUse = 0
        var spare: [Int: [Chunk]] = [:]
        var spareBytes = 0
        /// Threads waiting in `takeFromReserve` for a chunk to come back.
        var waiting = 0
    }

    private let state: SleepingLock<State>
    /// Signalled once per waiting thread woken by `give`.
    private let returned = DispatchSemaphore(value: 0)

    /// A pool for `byteBudget` bytes of chunks in use, and `reserve` more
    /// for writers that catch up (at least one of the largest chunks each).
    init(byteBudget: Int, reserve: Int = ChunkPool.largest) {
        state = SleepingLock(State(budget: max(byteBudget, Self.largest), reserve: max(reserve, Self.largest)))
    }

    /// Raises the budget and the reserve to at least these (never lowers
    /// them: other engines may rely on them).
    func ensureBudget(atLeast bytes: Int, reserve: Int) {
        state.withLock { state in
            state.budget = max(state.budget, bytes)
            state.reserve = max(state.reserve, reserve)
        }
    }

    /// The chunk size for a body that still has `remaining` bytes to send
    /// (nil when its length is unknown).
    static func size(forRemaining remaining: Int64?) -> Int {
        guard let remaining, remaining < Int64(largest) else { return largest }
        var size = smallest
        while size < Int(remaining) { size <<= 1 }
        return size
    }

    /// A chunk of `size` bytes (one of the pool's sizes), or nil when the
    /// budget is spent; never waits.
    func take(size: Int) -> Chunk? {
        let granted = state.withLock { state in Self.grant(size, within: state.budget, in: &state) }
        return granted.map { $0 ?? Chunk(byteCount: size) }
    }

    /// A chunk of `size` bytes past the budget, from the reserve, for a
    /// writer that holds no other chunk; when the reserve is spent too, it
    /// waits until enough come back (see the type's comment for why the
    /// wait ends).
    func takeFromReserve(size: Int) -> Chunk {
        while true {
            let granted = state.withLock { state -> Chunk?? in
                let granted = Self.grant(size, within: state.budget + state.reserve, in: &state)
                if granted == nil { state.waiting += 1 }
                return granted
            }
            if let granted { return granted ?? Chunk(byteCount: size) }
            returned.wait()
        }
    }

    /// Counts `size` bytes as in use if they fit `limit`: nil if not, else
    /// a spare chunk of that size when there is one.
    private static func grant(_ size: Int, within limit: Int, in state: inout State) -> Chunk?? {
        guard state.bytesInUse + size <= limit else { return nil }
        state.bytesInUse += size
        guard let chunk = state.spare[size]?.popLast() else { return .some(nil) }
        state.spareBytes -= size
        return .some(chunk)
    }

    /// Gives a chunk from `take` or `takeFromReserve` back.
    func give(_ chunk: Chunk) {
        let (keep, wake) = state.withLock { state -> (Bool, Int) in
            state.bytesInUse -= chunk.size
            // Every waiter looks again: each may need another size.
            defer { state.waiting = 0 }
            guard state.spareBytes + chunk.size <= state.budget else { return (false, state.waiting) }
            state.spare[chunk.size, default: []].append(chunk)
            state.spareBytes += chunk.size
            return (true, state.waiting)
        }
        if !keep { chunk.memory.deallocate() }
        for _ in 0..<wake { returned.signal() }
    }

    /// Bytes of chunks taken and not given back (for tests).
    var bytesInUse: Int { state.withLock { $0.bytesInUse } }
}

/// A buffer of body bytes on its way to the writer queue, reused once written.
/// `@unchecked Sendable`: one owner at a time: the loop thread while it fills
/// the chunk, then the writer queue until it gives the chunk back to the pool.
struct Chunk: @unchecked Sendable {
    let memory: UnsafeMutableRawBufferPointer
    var size: Int { memory.count }

    init(byteCount: Int) {
        // Aligned for direct I/O (see `HashingWriter.directAlignment`).
        memory = .allocate(byteCount: byteCount, alignment: HashingWriter.directAlignment)
    }
}
