import ContentStore
import Dispatch
import Foundation
import Synchronization

/// Looks out, while a run downloads, for another process at work on the
/// same cache: its mark in `runs/` (see `RunMarkers`), rows of its held in
/// `unrecorded/` (bodies it has moved into the store), or rows it has
/// recorded since this run looked its list up (SQLite's `data_version`,
/// see `Catalog.versionOthersChange`). Once one is seen, the run looks each
/// item up again before it fetches it (see `TransferEngine.download(count:…)`'s
/// `othersAtWork`).
///
/// The marks are looked at as the run begins, and again as items start
/// whenever `runs/` has changed (at most once a millisecond; a `stat`):
/// a run begun a moment after this one is seen before this one fetches
/// what that one has stored (on a filesystem that dates changes to the
/// second, at the next look of the timer). The timer looks at all four:
/// Four looks a second, on a queue of its own: the catalog's answer may
/// wait for the run's own write, and the transfers' threads must not. A
/// process stopped (Ctrl-Z) while another fetched the same list looks as
/// soon as it is continued (before, it fetched its whole remaining list again).
/// In the first quarter of a second, a look every 25 ms (`lookTimes`): two
/// runs of 200 photos begun 0–10 ms apart each finished in about 0.1 s
/// before its first look, and fetched the 100 they shared both (a look
/// costs a listing of `runs/` and of `unrecorded/` and a pragma: 0.08% of
/// a run's samples before `runs/` was).
final class OtherProcessLookout: @unchecked Sendable {
    // @unchecked: the timer is a Dispatch source, whose cancel may come from
    // any thread; the flag is atomic, the rest under a lock or constant.
    private let seen = Atomic(false)
    private let timer: any DispatchSourceTimer
    private let markers: RunMarkers
    private let mark: RunMarkers.Mark?
    /// When the marks were last looked for as an item started, and the change of `runs/` seen then.
    private let marksLook = Mutex<(at: ContinuousClock.Instant, change: timespec?)>((.now, nil))

    /// `catalogVersion`: the catalog's version when the list was looked up;
    /// nil (a new catalog, made as the downloads start) takes the first look's.
    /// `mark`: this run's in `runs/`, if it has one.
    init(cache: MediaCache, catalogVersion: Int?, mark: RunMarkers.Mark?) {
        markers = cache.runs
        self.mark = mark
        let versionBefore = Mutex<Int?>(catalogVersion)
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "mediafetch.others", qos: .utility))
        let looks = Atomic(0)
        timer.schedule(deadline: .now() + Self.lookTimes.first, repeating: Self.lookTimes.first, leeway: .milliseconds(5))
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            if looks.add(1, ordering: .relaxed).newValue == Self.lookTimes.quickLooks {
                timer.schedule(deadline: .now() + Self.lookTimes.then, repeating: Self.lookTimes.then, leeway: .milliseconds(50))
            }
            var found = cache.runs.othersAtWork(own: mark) || cache.unrecorded.anyHeldByOtherProcesses()
            if !found, !cache.catalogFailed, let version = try? cache.catalog.versionOthersChange() {
                found = versionBefore.withLock { before in
                    defer { before = before ?? version }
                    return before.map { $0 != version } ?? false
                }
            }
            guard found else { return }
            seen.store(true, ordering: .relaxed)
            // Seen once is enough: no more looks.
            timer.cancel()
        }
        marksLook.withLock { $0.change = markers.lastChange() }
        timer.resume()
        if markers.othersAtWork(own: mark) {
            seen.store(true, ordering: .relaxed)
            timer.cancel()
        }
    }

    /// When the looks come: every `first` for `quickLooks` looks, then every `then`.
    static let lookTimes = (first: DispatchTimeInterval.milliseconds(25), quickLooks: 10, then: DispatchTimeInterval.milliseconds(250))

    /// Whether another process has been seen at work: a flag, else a look
    /// at `runs/` when it has changed (a `stat` at most once a millisecond).
    var sawOthers: @Sendable () -> Bool {
        { [self] in seen.load(ordering: .relaxed) || marksAppeared() }
    }

    /// Whether another run's mark has appeared in `runs/` since the last
    /// look, looked for when the directory has changed, or changed lately:
    /// a change within one tick of the filesystem's clock (a few
    /// milliseconds) leaves its time as it was.
    private func marksAppeared() -> Bool {
        let now = ContinuousClock.now
        let due = marksLook.withLock { look -> Bool in
            guard now - look.at >= .milliseconds(1) else { return false }
            look.at = now
            let change = markers.lastChange()
            defer { look.change = change }
            guard let change else { return false }
            let changed = look.change.map { $0.tv_sec != change.tv_sec || $0.tv_nsec != change.tv_nsec } ?? true
            let age = Date().timeIntervalSince1970 - (Double(change.tv_sec) + Double(change.tv_nsec) / 1e9)
            // (A filesystem whose clock runs ahead of this one's is not taken as changed lately.)
            return changed || (0..<0.05).contains(age)
        }
        guard due, markers.othersAtWork(own: mark) else { return false }
        seen.store(true, ordering: .relaxed)
        return true
    }

    /// Stops looking (the downloads are over).
    func stop() { timer.cancel() }
}
