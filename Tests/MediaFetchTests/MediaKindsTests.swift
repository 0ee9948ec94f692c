import ContentStore
import Foundation
import MediaCheck
@testable import MediaFetch
import Testing

/// What kind of item a body makes, from what was asked and its first bytes.
@Suite struct MediaKindsTests {
    private let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x00]
    private let wav = Array("RIFF\u{24}\u{0}\u{0}\u{0}WAVEfmt ".utf8)
    private let m4a = Array("\u{0}\u{0}\u{0}\u{20}ftypM4A \u{0}\u{0}\u{2}\u{0}".utf8)
    private let noise: [UInt8] = [0x13, 0x9A, 0x02, 0x77, 0xE1, 0x00, 0x5C, 0xB0]
    private let mp3Frame: [UInt8] = [0xFF, 0xFB, 0x90, 0x64, 0x00, 0x00]
    /// An Ogg page whose first packet is Theora's (video) header.
    private let theora = Array("OggS\u{0}\u{2}".utf8) + [UInt8](repeating: 0, count: 20) + [1, 42] + Array("\u{80}theora".utf8)
    private let vorbis = Array("OggS\u{0}\u{2}".utf8) + [UInt8](repeating: 0, count: 20) + [1, 30] + Array("\u{01}vorbis".utf8)

    private func judge(_ url: String, kind: ItemKind = .file, type: String? = nil, redirectedTo: String? = nil,
                       _ opening: [UInt8]) -> MediaKinds.Judgement {
        MediaKinds.judge(kind: kind, url: url, redirectedTo: redirectedTo, contentType: type, opening: { opening })
    }

    @Test func anItemOfUnknownKindIsWhatItsBytesAre() {
        #expect(judge("http://h/a.jpg", jpeg) == .store(.photo))
        #expect(judge("http://h/download?id=3", type: "application/octet-stream", jpeg) == .store(.photo))
        // Named a photo, but no image's bytes: a file, stored as it came.
        #expect(judge("http://h/a.jpg", noise) == .store(.file))
        #expect(judge("http://h/data.bin", noise) == .store(.file))
        // A sound's first bytes, nothing asked: a sound if it decodes, else a file.
        #expect(judge("http://h/data.bin", wav) == .checkSound(refusable: false, otherwise: .file))
        #expect(judge("http://h/data.bin", vorbis) == .checkSound(refusable: false, otherwise: .file))
        #expect(judge("http://h/data.bin", theora) == .store(.file))
        // A bare MPEG frame is one binary file in a few thousand: not looked at unasked.
        #expect(judge("http://h/data.bin", mp3Frame) == .store(.file))
    }

    @Test func aSoundAskedForIsDecodedAndRefusedOnlyWhereNotDecodingProvesItDamaged() {
        let refusable = MediaKinds.Judgement.checkSound(refusable: true, otherwise: .sound)
        let kept = MediaKinds.Judgement.checkSound(refusable: false, otherwise: .sound)
        // One of libsndfile's own formats by its first bytes, or no media at all where the name, type or kind say one.
        #expect(judge("http://h/zvony.wav", wav) == refusable)
        #expect(judge("http://h/play?id=4", type: "audio/wav", wav) == refusable)
        #expect(judge("http://h/zvony.MP3", noise) == refusable)
        #expect(judge("http://h/play?id=4", type: "audio/mpeg; charset=binary", noise) == refusable)
        #expect(judge("http://h/dl/4", redirectedTo: "http://cdn/4.flac", noise) == refusable)
        #expect(judge("http://h/4", kind: .sound, noise) == refusable)
        // An image where a sound was asked for does not decode, and is refused.
        #expect(judge("http://h/zvony.mp3", jpeg) == refusable)
        // What may be an MP3 or something else behind its tag or frame: decoded, and kept if it does not.
        #expect(judge("http://h/zvony.mp3", mp3Frame) == kept)
        #expect(judge("http://h/song.aac", Array("ID3\u{4}\u{0}\u{0}".utf8)) == kept)
        // Noise at `.ogg` or sent as `audio/ogg`: Ogg video would open with `OggS`.
        #expect(judge("http://h/clip.ogg", noise) == refusable)
        #expect(judge("http://h/clip", type: "audio/ogg", noise) == refusable)
        #expect(judge("http://h/list", type: "audio/x-mpegurl", Array("#EXTM3U\n".utf8)) == kept)
        // Media libsndfile cannot read: a sound, stored as it came.
        #expect(judge("http://h/talk.m4a", m4a) == .store(.sound))
        #expect(judge("http://h/talk.mp3", m4a) == .store(.sound))
        // Ogg of another codec (Theora's video) is stored unless its pages prove it cut or damaged.
        #expect(judge("http://h/clip.ogg", theora) == kept)
        // AMR: never refused (`.amr` names no format of libsndfile's).
        #expect(judge("http://h/voice.amr", Array("#!AMR\n\u{3C}".utf8) + [UInt8](repeating: 0x55, count: 40)) != refusable)
    }

    /// A body that was kept if it did not decode (an MP3 or something else
    /// behind its tag, a sound at a URL that did not say so) is refused
    /// after all where the failure proves it damaged: its header announces
    /// more than it holds, or it broke a second or more into its audio. A
    /// check that did not run or was stopped refuses nothing.
    @Test func aFailureThatProvesDamageRefusesTheBody() {
        let cutShort = SoundFileError(description: "its header announces 800956 bytes of audio, 400478 are there", stage: .length)
        let brokenLate = SoundFileError(description: "Unspecified internal error after 7.4 s of audio", stage: .decoding, decodedSeconds: 7.43)
        var brokenPastItsAudio = brokenLate
        brokenPastItsAudio.announcesLength = false
        let brokenAtOnce = SoundFileError(description: "Unspecified internal error after 0.1 s of audio", stage: .decoding, decodedSeconds: 0.1)
        let unreadable = SoundFileError(description: "Format not recognised")
        let unavailable = SoundFileError(description: "libsndfile cannot be loaded", unavailable: true)
        for error in [cutShort, brokenLate] {
            #expect(MediaKinds.refuses(error, refusable: false), "\(error)")
        }
        for error in [brokenAtOnce, unreadable, brokenPastItsAudio] {
            #expect(!MediaKinds.refuses(error, refusable: false), "\(error)")
            #expect(MediaKinds.refuses(error, refusable: true), "\(error)")
        }
        var unsupported = SoundFileError(description: "File contains data in an unimplemented format")
        unsupported.unsupported = true
        for error in [unavailable, SoundFileError.stopped, unsupported] {
            #expect(!MediaKinds.refuses(error, refusable: true), "\(error)")
        }
    }

    @Test func aPhotoAskedForStaysAPhoto() {
        #expect(judge("http://h/p", kind: .photo, noise) == .store(.photo))
        #expect(judge("http://h/p.mp3", kind: .photo, wav) == .store(.photo))
    }

    @Test func aSoundsFactsJoinTheItemsOwn() throws {
        let facts = SoundFacts(format: "mp3", sampleRate: 44_100, channels: 1, frames: 88_200)
        let alone = try #require(MediaKinds.metadata(nil, adding: facts).flatMap(JSONValue.members(ofObject:)))
        #expect(alone == ["durationSeconds": .number("2.0"), "sampleRate": .number("44100"), "channels": .number("1"),
                          "format": .string("mp3")])
        // What the item came with wins (a feed's own title or duration).
        let given = try #require(MediaKinds.metadata(#"{"id":"17","durationSeconds":2.5}"#, adding: facts)
            .flatMap(JSONValue.members(ofObject:)))
        #expect(given["id"] == .string("17"))
        #expect(given["durationSeconds"] == .number("2.5"))
        #expect(given["format"] == .string("mp3"))
        // Metadata that is no object is kept as it was given.
        #expect(MediaKinds.metadata("[1,2]", adding: facts) == "[1,2]")
    }

    /// A URL cached in one collection goes into another with the sound's
    /// facts, and nothing else of the first item's metadata.
    @Test func anotherItemsFactsAreTakenAndNothingElse() throws {
        let other = #"{"pin":"Bratislava","durationSeconds":20.0,"sampleRate":44100,"channels":2,"format":"wav"}"#
        let taken = try #require(MediaKinds.metadata(nil, takingFactsOf: other).flatMap(JSONValue.members(ofObject:)))
        #expect(taken == ["durationSeconds": .number("20.0"), "sampleRate": .number("44100"), "channels": .number("2"),
                          "format": .string("wav")])
        #expect(MediaKinds.metadata(#"{"id":"3"}"#, takingFactsOf: #"{"pin":"x"}"#) == #"{"id":"3"}"#)
        #expect(MediaKinds.metadata(nil, takingFactsOf: nil) == nil)
    }

    /// A sound's extension is one the page check knows for media: the name
    /// is read through `PageInsteadOfMedia.mediaExtension`, which knows no other.
    @Test func soundExtensionsAreMediaExtensions() {
        #expect(MediaKinds.soundExtensions.isSubset(of: PageInsteadOfMedia.mediaExtensions))
        #expect(MediaKinds.readableExtensions.isSubset(of: MediaKinds.soundExtensions))
    }
}
