import Synchronization

/// Buffers for body bytes on their way from the loop thread to the writers.
///
/// Chunks come in powers of two from 4 KiB to 256 KiB, sized to what a body
/// still has to send, so a 64 KiB photo takes a 64 KiB chunk rather than
/// 256 KiB, and four times as many small bodies fit in the same memory. The
/// bytes of chunks in use never exceed `byteBudget`, which an engine raises to
/// four of the largest chunks per transfer slot (each running transfer holds
/// the chunk it is filling and those queued for its writer, so a smaller
/// budget would hold the loop thread up while a writer catches up); `take` returns nil
/// rather than wait (the loop thread must never block on another transfer),
/// unless asked for a chunk past the budget. Returned chunks are kept for
/// reuse, up to `byteBudget` bytes, so their pages stay warm; beyond that
/// they are freed. Memory is thus bounded by twice the budget, plus a
/// chunk per running transfer, however many files pass through.
final class ChunkPool: Sendable {
    static let smallest = 4 << 10
    static let largest = 256 << 10

    /// Bytes of chunks that may be in use at once.
    var byteBudget: Int { state.withLock { $0.budget } }

    private struct State {
        var budget: Int
        var bytesInUse = 0
        var spare: [Int: [Chunk]] = [:]
        var spareBytes = 0
    }

    private let state: SleepingLock<State>

    init(byteBudget: Int) {
        state = SleepingLock(State(budget: max(byteBudget, Self.largest)))
    }

    /// Raises the budget to at least `bytes` (never lowers it: other engines may rely on it).
    func ensureBudget(atLeast bytes: Int) {
        state.withLock { $0.budget = max($0.budget, bytes) }
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
    /// budget is spent; never waits. `pastBudget` grants it even then: for
    /// a writer that holds no other chunk (see `HashingWriter.write`), so
    /// what the pool hands out past its budget is at most one chunk per
    /// running transfer.
    func take(size: Int, pastBudget: Bool = false) -> Chunk? {
        let reused = state.withLock { state -> (granted: Bool, chunk: Chunk?) in
            guard pastBudget || state.bytesInUse + size <= state.budget else { return (false, nil) }
            state.bytesInUse += size
            guard let chunk = state.spare[size]?.popLast() else { return (true, nil) }
            state.spareBytes -= size
            return (true, chunk)
        }
        guard reused.granted else { return nil }
        return reused.chunk ?? Chunk(byteCount: size)
    }

    /// Gives a chunk from `take` back.
    func give(_ chunk: Chunk) {
        let keep = state.withLock { state -> Bool in
            state.bytesInUse -= chunk.size
            guard state.spareBytes + chunk.size <= state.budget else { return false }
            state.spare[chunk.size, default: []].append(chunk)
            state.spareBytes += chunk.size
            return true
        }
        if !keep { chunk.memory.deallocate() }
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
