import URLText

/// The items of a job, by position. A job holds its list for the whole run,
/// so a list may keep its items more compactly than as `FetchItem`s (a
/// `URLBlock` keeps a URL's bytes and little else), and what the job sets
/// aside (repeats, cached items) is a list of positions, not of copies.
public protocol FetchList: Sendable {
    var count: Int { get }
    /// The item at `index`, in `0 ..< count`.
    subscript(_ index: Int) -> FetchItem { get }
}

extension Array: FetchList where Element == FetchItem {}

/// Some items of another list, in their order; collection names may be
/// replaced by their stored forms (see `FetchJob.settleCached`).
struct FetchListSelection: FetchList {
    let base: any FetchList
    /// Positions in `base`: four bytes an item left, against a `FetchItem`'s 72.
    let positions: [Int32]
    /// A collection name as given, and the catalog's own form of it.
    var storedCollectionNames: [String: String] = [:]

    var count: Int { positions.count }

    subscript(_ index: Int) -> FetchItem {
        var item = base[Int(positions[index])]
        if let stored = storedCollectionNames[item.collection] { item.collection = stored }
        return item
    }
}

extension FetchListSelection {
    /// The items at `positions` of `list`; when `list` is a selection itself
    /// (the list without its repeats), of the list under it, so that an item
    /// is read through one selection, not two.
    init(selecting positions: [Int32], of list: any FetchList, storedCollectionNames: [String: String]) {
        if let selection = list as? FetchListSelection {
            self.init(base: selection.base, positions: positions.map { selection.positions[Int($0)] },
                      storedCollectionNames: storedCollectionNames)
        } else {
            self.init(base: list, positions: positions, storedCollectionNames: storedCollectionNames)
        }
    }
}

extension FetchList {
    /// The items as an array (tests, and short lists).
    public var items: [FetchItem] { (0..<count).map { self[$0] } }

    /// The list without repeated (collection, URL) pairs, keeping the first.
    /// URLs that differ only in their passwords are one item, as in the
    /// catalog; the first that gives a password stands for them, in the
    /// first's place (`list` shows `user@host`, so a list merged from its
    /// output and the real URLs asked without the password, and failed,
    /// as the lines fell). Without repeats (the usual case) it is the list
    /// itself.
    ///
    /// Held while it works: a hash and a position per item (16–32 bytes
    /// with the table's room to spare) and the positions kept, not the items; the rare items whose hash an earlier, different item
    /// had are compared whole.
    /// `hash` is the hash of a collection name and a URL (a test's may collide on purpose).
    func withoutRepeats(hash: (String, String) -> Int = Self.hash) -> any FetchList {
        var firstWithHash: [Int: Int32] = [:]
        firstWithHash.reserveCapacity(count)
        var firstSharingAHash: [[String]: Int32] = [:]
        var kept: [Int32]?
        // The first position of a repeated item, and the repeat that gives the password it lacks.
        var withPassword: [Int32: Int32] = [:]
        for index in 0..<count {
            let item = self[index]
            let url = item.catalogURL
            let hash = hash(item.collection, url)
            var first: Int32?
            if let candidate = firstWithHash[hash] {
                let earlier = self[Int(candidate)]
                if earlier.collection == item.collection && earlier.catalogURL == url {
                    first = candidate
                } else if let sharing = firstSharingAHash[[item.collection, url]] {
                    first = sharing
                } else {
                    firstSharingAHash[[item.collection, url]] = Int32(index)
                }
            } else {
                firstWithHash[hash] = Int32(index)
            }
            guard let first else {
                kept?.append(Int32(index))
                continue
            }
            if kept == nil { kept = (0..<index).map { Int32($0) } }
            if withPassword[first] == nil, url != item.url, URLPassword.isGiven(in: item.url),
               !URLPassword.isGiven(in: self[Int(first)].url) {
                withPassword[first] = Int32(index)
            }
        }
        guard var kept else { return self }
        if !withPassword.isEmpty { kept = kept.map { withPassword[$0] ?? $0 } }
        return FetchListSelection(base: self, positions: kept)
    }

    private static func hash(_ collection: String, _ url: String) -> Int {
        var hasher = Hasher()
        hasher.combine(collection)
        hasher.combine(url)
        return hasher.finalize()
    }
}
