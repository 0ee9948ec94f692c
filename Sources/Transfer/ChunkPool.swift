/// Buffers for body bytes on their way from the loop thread to the writers.
///
/// Chunks come in powers of two from 4 KiB to 256 KiB, sized to what a body
/// still has to send, so a 64 KiB photo takes a 64 KiB chunk rather than
/// 256 KiB, and four times as many small bodies fit in the same memory.
///
/// `take` hands out chunks while those in use stay within the byte budget,
/// and never waits: past the budget it refuses, and the transfer that asked
/// is paused (see `HashingWriter.write`) until `wakeWhenRoom` calls back.
/// The loop thread that receives for every transfer thus never waits for a
/// disk, however slow.
///
/// Why a paused transfer always gets going again: each engine adds a share
/// to the budget of at least two of the largest chunks per transfer slot,
/// and a running transfer fills one chunk at most. So at most half the
/// budget is chunks being filled; the rest are queued to the writer
/// threads, which give them back without any transfer's help, and a wake-up
/// asks for no more than one of the largest chunks (or what the write needs).
///
/// A writer's pool needs room for two of the largest chunks at least: one
/// write can need room in the chunk being filled and a new one.
///
/// Returned chunks are kept for reuse, up to the budget, so their pages
/// stay warm; beyond that they are freed. Memory is thus bounded by twice
/// the budget (and what libcurl keeps for each paused transfer: the rest of
/// one read, 256 KiB at most), however many files pass through.
final class ChunkPool: Sendable {
    static let smallest = 4 << 10
    static let largest = 256 << 10

    /// Bytes of chunks that may be in use at once: the engines' shares, or
    /// the pool's own floor when they add up to less.
    var byteBudget: Int { state.withLock { $0.budget } }

    private struct State {
        let floor: Int
        /// What the engines alive have added (see `addShare`).
        var shares = 0
        var budget: Int { max(floor, shares) }
        var bytesInUse = 0
        var spare: [Int: [Chunk]] = [:]
        var spareBytes = 0
        /// Called once when room comes back: each with the bytes it waits for.
        var roomWaiters: [(bytes: Int, wake: @Sendable () -> Void)] = []

        /// Whether `bytes` more fit now. A pool with nothing in use grants
        /// any request, so that one larger than the budget cannot wait forever.
        func fits(_ bytes: Int) -> Bool {
            bytesInUse == 0 || bytesInUse + bytes <= budget
        }

        /// Whether a waiter for `bytes` should be woken: when they fit, and
        /// a largest chunk's room at least (a transfer that asked for a small
        /// one resumes for more than that). Waiting for a quarter of the
        /// budget, so as to resume transfers less often, held eight paused
        /// transfers of large bodies until sixteen chunks had come back:
        /// the cores and the disk idled in turn, and 8 x 64 MiB took 0.63 s
        /// against 0.43 s now (six interleaved rounds each, the same memory).
        func hasRoom(for bytes: Int) -> Bool {
            // (At most half the budget: its floor is two largest chunks, and a write's shortfall is one at most.)
            bytesInUse == 0 || budget - bytesInUse >= max(bytes, ChunkPool.largest)
        }
    }

    private let state: SleepingLock<State>

    /// A pool whose budget is at least `byteBudget` bytes (two of the
    /// largest chunks at least).
    init(byteBudget: Int) {
        state = SleepingLock(State(floor: max(byteBudget, 2 * Self.largest)))
    }

    /// Adds `bytes` to the engines' shares of the budget (an engine that
    /// starts); `removeShare` takes them back when it ends.
    func addShare(_ bytes: Int) {
        state.withLock { $0.shares += bytes }
    }

    func removeShare(_ bytes: Int) {
        let wake = state.withLock { state in
            state.shares -= bytes
            return Self.takeWaiters(in: &state)
        }
        for waiter in wake { waiter() }
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
        take(sizes: [size])?.first
    }

    /// Chunks of these sizes, all or none: nil when they do not all fit the
    /// budget. Never waits.
    func take(sizes: [Int]) -> [Chunk]? {
        let bytes = sizes.reduce(0, +)
        let spares = state.withLock { state -> [Chunk?]? in
            guard state.fits(bytes) else { return nil }
            state.bytesInUse += bytes
            return sizes.map { Self.spare(of: $0, in: &state) }
        }
        guard let spares else { return nil }
        return zip(sizes, spares).map { size, spare in spare ?? Chunk(byteCount: size) }
    }

    /// A kept chunk of `size` bytes, if there is one.
    private static func spare(of size: Int, in state: inout State) -> Chunk? {
        guard let chunk = state.spare[size]?.popLast() else { return nil }
        state.spareBytes -= size
        return chunk
    }

    /// Arranges for `wake` to be called (once, on the thread that gives a
    /// chunk back) when `bytes` fit again with room to spare. Returns false,
    /// and never calls `wake`, when they fit now: the caller tries again at
    /// once. Checked under the same lock as `give`, so no return is missed.
    func wakeWhenRoom(for bytes: Int, _ wake: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard !state.hasRoom(for: bytes) else { return false }
            state.roomWaiters.append((bytes, wake))
            return true
        }
    }

    /// Gives a chunk from `take` back.
    func give(_ chunk: Chunk) {
        let (keep, wake) = state.withLock { state -> (Bool, [@Sendable () -> Void]) in
            state.bytesInUse -= chunk.size
            let wake = Self.takeWaiters(in: &state)
            guard state.spareBytes + chunk.size <= state.budget else { return (false, wake) }
            state.spare[chunk.size, default: []].append(chunk)
            state.spareBytes += chunk.size
            return (true, wake)
        }
        if !keep { chunk.memory.deallocate() }
        for waiter in wake { waiter() }
    }

    /// Removes and returns the waiters that now have room.
    private static func takeWaiters(in state: inout State) -> [@Sendable () -> Void] {
        guard !state.roomWaiters.isEmpty else { return [] }
        var woken: [@Sendable () -> Void] = []
        var still: [(bytes: Int, wake: @Sendable () -> Void)] = []
        for waiter in state.roomWaiters {
            if state.hasRoom(for: waiter.bytes) { woken.append(waiter.wake) } else { still.append(waiter) }
        }
        state.roomWaiters = still
        return woken
    }

    /// Bytes of chunks taken and not given back (for tests).
    var bytesInUse: Int { state.withLock { $0.bytesInUse } }

    /// How many wait for room (for tests).
    var roomWaiterCount: Int { state.withLock { $0.roomWaiters.count } }
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
