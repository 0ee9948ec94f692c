import ContentStore
import MediaCheck
import Synchronization
import Transfer

/// What kind of item a downloaded body makes, and whether libsndfile must
/// look at it first. A photo or sound asked for as such (`album`, `sounds`)
/// stays one; an item of unknown kind (`get`'s) becomes a photo when its
/// first bytes are an image's, and a sound when libsndfile decodes it.
/// A sound asked for (by its kind, its URL's extension or its type
/// `audio/*`) is decoded through libsndfile before it is stored: one that
/// does not decode is refused, as a page in its place is, unless it opens
/// as media libsndfile does not read (M4A, WMA…), which is stored as it
/// came.
enum MediaKinds {
    enum Judgement: Equatable {
        /// Stored as this kind, as it is.
        case store(ItemKind)
        /// Decoded through libsndfile first: a sound with its facts when it
        /// decodes; else refused when `asked`, or stored as `otherwise`.
        case checkSound(asked: Bool, otherwise: ItemKind)
    }

    /// The judgement for a body of `item` with `contentType` and first
    /// bytes `opening` (nil when they were not kept: a resumed body; the
    /// file is read then), that `redirectedTo` another URL if so.
    static func judge(kind: ItemKind, url: String, redirectedTo: String?, contentType: String?,
                      opening: () -> [UInt8]) -> Judgement {
        switch kind {
        case .photo:
            return .store(.photo)
        case .sound:
            return soundAsked(opening())
        case .file:
            if isSoundName(url) || redirectedTo.map(isSoundName) == true
                || PageInsteadOfMedia.mediaType(contentType)?.hasPrefix("audio/") == true {
                return soundAsked(opening())
            }
            let bytes = opening()
            if MediaSignature.image(bytes) != nil { return .store(.photo) }
            if MediaSignature.readableSound(bytes) { return .checkSound(asked: false, otherwise: .file) }
            return .store(.file)
        }
    }

    /// A sound was asked for: decoded first, unless it opens as media that
    /// libsndfile does not read.
    private static func soundAsked(_ opening: [UInt8]) -> Judgement {
        if !MediaSignature.readableSound(opening, bareFrames: true), BodyOpening.opensWithAMediaSignature(opening),
           MediaSignature.image(opening) == nil {
            return .store(.sound)
        }
        return .checkSound(asked: true, otherwise: .sound)
    }

    /// Whether the URL's file name ends in a sound's extension.
    static func isSoundName(_ url: String) -> Bool {
        PageInsteadOfMedia.mediaExtension(of: url).map(soundExtensions.contains) ?? false
    }

    static let soundExtensions: Set<String> = [
        "mp3", "wav", "flac", "ogg", "oga", "opus", "m4a", "aac", "aif", "aiff", "m4b", "wma", "mka", "amr", "caf",
        "ape", "dsf", "dff", "mpc", "tta", "wv", "ac3", "weba",
    ]

    /// `metadata` (a JSON object's text, or nil) with the sound's facts
    /// added: `durationSeconds`, `sampleRate`, `channels`, `format`; the
    /// facts the item came with win.
    static func metadata(_ metadata: String?, adding facts: SoundFacts) -> String {
        var members: [String: JSONValue] = [
            "durationSeconds": .number(facts.durationSeconds),
            "sampleRate": .integer(facts.sampleRate),
            "channels": .integer(facts.channels),
            "format": .string(facts.format),
        ]
        if let metadata, let given = JSONValue.members(ofObject: metadata) {
            members.merge(given) { _, given in given }
        }
        var text = ""
        JSONText.writeCompact(.object(members), into: &text)
        return text
    }

    /// Why a sound that was asked for is not stored, in one line, as
    /// `PageInsteadOfMedia` words its refusals.
    static func refusal(_ error: SoundFileError, contentType: String?, size: Int64) -> String {
        let type = PageInsteadOfMedia.mediaType(contentType).map { "\($0), " } ?? ""
        return "the server sent data that libsndfile cannot decode as a sound (\(error); \(type)\(ByteSize.format(size))) "
            + "where a sound was asked for; not stored"
    }
}

/// Counts checks under way, for a run that must not end before them.
final class ChecksUnderWay: Sendable {
    private let state = Mutex((count: 0, waiters: [CheckedContinuation<Void, Never>]()))

    func begin() { state.withLock { $0.count += 1 } }

    func end() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count -= 1
            guard state.count == 0 else { return [] }
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no check is under way.
    func allEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.count == 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
