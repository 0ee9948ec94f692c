import ContentStore
import MediaCheck
import Transfer

/// What kind of item a downloaded body makes, and whether libsndfile must
/// look at it first. A photo or sound asked for as such (`album`, `sounds`)
/// stays one; an item of unknown kind (`get`'s) becomes a photo when its
/// first bytes are an image's, and a sound when libsndfile decodes it.
/// A sound asked for (by its kind, its URL's extension or its type
/// `audio/*`) is decoded through libsndfile before it is stored. It is
/// refused when it does not decode only where that proves it damaged: it
/// opens as one of libsndfile's formats (or as an image), or it opens as no
/// media at all where its name, type or kind say a format libsndfile reads
/// (`.mp3`, `audio/wav`), or its failure proves it (an MP3 shorter than its
/// header announces, or broken after a second of audio). Other audio (M4A, AMR, AAC behind an ID3 tag, a
/// playlist sent as `audio/x-mpegurl`) is stored as it came, and so is
/// a whole file of libsndfile's formats that it does not open or decode
/// (see `SoundFileError.unsupported`).
enum MediaKinds {
    enum Judgement: Equatable {
        /// Stored as this kind, as it is.
        case store(ItemKind)
        /// Decoded through libsndfile first: a sound with its facts when it
        /// decodes; else refused when `refusable` (or its failure proves it
        /// damaged: see `refuses`), or stored as `otherwise`.
        case checkSound(refusable: Bool, otherwise: ItemKind)
    }

    /// Whether a body checked under `.checkSound(refusable:otherwise:)` that
    /// failed with `error` is refused: when `refusable`, or when the failure
    /// itself proves it a damaged sound, asked for as one or not (a WAV or
    /// MP3 shorter than its header announces, or one broken a second or
    /// more into its audio: see `SoundFileError.provesDamage`), as a photo
    /// cut short is refused wherever it came from. Never when the check
    /// could not run, or was stopped (the body is kept for the next run),
    /// or libsndfile does not support what the file holds (`unsupported`).
    static func refuses(_ error: SoundFileError, refusable: Bool) -> Bool {
        // (What libsndfile does not decode, in a format it knows, is stored as it came.)
        guard !error.unavailable, !error.unsupported, error.stage != .stopped else { return false }
        return refusable || error.provesDamage
    }

    /// The judgement for a body of an item of `kind` at `url` (redirected
    /// to `redirectedTo`, if so) with `contentType` and first bytes `opening`.
    static func judge(kind: ItemKind, url: String, redirectedTo: String?, contentType: String?,
                      opening: () -> [UInt8]) -> Judgement {
        switch kind {
        case .photo:
            return .store(.photo)
        case .sound:
            return soundAsked(opening(), namesReadableFormat: true)
        case .file:
            let type = PageInsteadOfMedia.mediaType(contentType)
            let extensions = ([url] + (redirectedTo.map { [$0] } ?? [])).compactMap(PageInsteadOfMedia.mediaExtension(of:))
            if extensions.contains(where: soundExtensions.contains) || type?.hasPrefix("audio/") == true {
                let readable = extensions.contains(where: readableExtensions.contains) || type.map(readableTypes.contains) == true
                return soundAsked(opening(), namesReadableFormat: readable)
            }
            let bytes = opening()
            if MediaSignature.image(bytes) != nil { return .store(.photo) }
            if MediaSignature.readableSound(bytes) { return .checkSound(refusable: false, otherwise: .file) }
            return .store(.file)
        }
    }

    /// A sound was asked for: decoded first, unless it opens as media that
    /// libsndfile does not read; refusable where not decoding proves it damaged.
    private static func soundAsked(_ opening: [UInt8], namesReadableFormat: Bool) -> Judgement {
        if MediaSignature.soundContainer(opening) || MediaSignature.image(opening) != nil {
            return .checkSound(refusable: true, otherwise: .sound)
        }
        // (Ogg of another codec, a Skeleton stream first, Theora's video: checked for damage by its pages.)
        if MediaSignature.readableSound(opening, bareFrames: true) || opening.starts(with: Array("OggS".utf8)) {
            return .checkSound(refusable: false, otherwise: .sound)
        }
        if BodyOpening.opensWithAMediaSignature(opening) || TextFormatMedia.opens(opening, whole: false) {
            return .store(.sound)
        }
        return .checkSound(refusable: namesReadableFormat, otherwise: .sound)
    }

    /// Extensions of sound files (what asks for a sound): those of
    /// `PageInsteadOfMedia.mediaExtensions` that name sounds.
    static let soundExtensions: Set<String> = [
        "mp3", "wav", "flac", "ogg", "oga", "opus", "m4a", "aac", "aif", "aiff", "m4b", "wma", "mka", "amr", "caf",
        "ape", "dsf", "dff", "mpc", "tta", "wv", "ac3", "weba",
    ]

    /// Extensions and types of libsndfile's formats, for a body that opens
    /// as no media at all (Ogg video opens with `OggS`, and is stored).
    static let readableExtensions: Set<String> = ["mp3", "wav", "flac", "aif", "aiff", "ogg", "oga", "opus", "caf"]
    static let readableTypes: Set<String> = [
        "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg", "audio/x-mp3", "audio/wav", "audio/x-wav", "audio/wave",
        "audio/vnd.wave", "audio/flac", "audio/x-flac", "audio/aiff", "audio/x-aiff", "audio/basic", "audio/opus",
        "audio/ogg", "audio/vorbis", "audio/x-vorbis+ogg",
    ]

    /// `metadata` (a JSON object's text, or nil) with the sound's facts
    /// added: `durationSeconds`, `sampleRate`, `channels`, `format`; the
    /// facts the item came with win, and metadata that is not an object is
    /// kept as it is, without them.
    static func metadata(_ metadata: String?, adding facts: SoundFacts) -> String? {
        merged(metadata, facts: members(of: facts))
    }

    /// A sound's facts as the members of its metadata.
    static func members(of facts: SoundFacts) -> [String: JSONValue] {
        [
            "durationSeconds": .number(facts.durationSeconds),
            "sampleRate": .integer(facts.sampleRate),
            "channels": .integer(facts.channels),
            "format": .string(facts.format),
        ]
    }

    /// `metadata` with the sound facts of `other` (another item's metadata
    /// for the same URL) added, and nothing else of it.
    static func metadata(_ metadata: String?, takingFactsOf other: String?) -> String? {
        guard let other, let members = JSONValue.members(ofObject: other) else { return metadata }
        let facts = members.filter { factKeys.contains($0.key) }
        return facts.isEmpty ? metadata : merged(metadata, facts: facts)
    }

    private static let factKeys = Set(members(of: SoundFacts(format: "", sampleRate: 0, channels: 0, frames: 0)).keys)

    private static func merged(_ metadata: String?, facts: [String: JSONValue]) -> String? {
        var members = facts
        if let metadata {
            guard let given = JSONValue.members(ofObject: metadata) else { return metadata }
            members.merge(given) { _, given in given }
        }
        var text = ""
        JSONText.writeCompact(.object(members), into: &text)
        return text
    }

    /// Why a photo is not stored: its image is cut short (`shortfall`, see
    /// `ImageEnd`: a connection closed early where no length was given, or
    /// a length short of the file), in one line as `refusal` words a sound's.
    static func photoRefusal(_ shortfall: String, contentType: String?, size: Int64) -> String {
        "the server sent a photo cut short (\(shortfall); \(typeAndSize(contentType, size))); not stored"
    }

    /// A refused body's media type (when it has one) and size, as refusal
    /// lines end: `image/jpeg, 4.9 KiB`.
    static func typeAndSize(_ contentType: String?, _ size: Int64) -> String {
        let type = PageInsteadOfMedia.mediaType(contentType).map { "\($0), " } ?? ""
        return type + ByteSize.format(size)
    }

    /// Why a sound is not stored, in one line, as `PageInsteadOfMedia` words
    /// its refusals: what the server sent first (no sound, a damaged one,
    /// one cut short), then libsndfile's words, and whether a sound was
    /// asked for (`soundAsked`: else the body said it was one).
    static func refusal(_ error: SoundFileError, contentType: String?, size: Int64, soundAsked: Bool = true) -> String {
        let what = switch error.stage {
        case .opening: "data that libsndfile does not read as a sound"
        // (A stopped decode is no refusal: the caller keeps the body.)
        case .decoding, .integrity, .stopped: "a damaged sound"
        case .length: "a sound cut short"
        }
        let asked = soundAsked ? " where a sound was asked for" : ""
        return "the server sent \(what) (\(error); \(typeAndSize(contentType, size)))\(asked); not stored"
    }
}
