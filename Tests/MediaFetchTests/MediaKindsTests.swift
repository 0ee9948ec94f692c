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
        #expect(judge("http://h/data.bin", wav) == .checkSound(asked: false, otherwise: .file))
        // A bare MPEG frame is one binary file in a few thousand: not looked at unasked.
        #expect(judge("http://h/data.bin", mp3Frame) == .store(.file))
    }

    @Test func aSoundAskedForIsDecodedUnlessItIsMediaLibsndfileDoesNotRead() {
        #expect(judge("http://h/zvony.mp3", mp3Frame) == .checkSound(asked: true, otherwise: .sound))
        #expect(judge("http://h/zvony.MP3", noise) == .checkSound(asked: true, otherwise: .sound))
        #expect(judge("http://h/play?id=4", type: "audio/mpeg; charset=binary", noise) == .checkSound(asked: true, otherwise: .sound))
        #expect(judge("http://h/dl/4", redirectedTo: "http://cdn/4.flac", noise) == .checkSound(asked: true, otherwise: .sound))
        #expect(judge("http://h/4", kind: .sound, noise) == .checkSound(asked: true, otherwise: .sound))
        // Media libsndfile cannot read (M4A): a sound, not looked into.
        #expect(judge("http://h/talk.m4a", m4a) == .store(.sound))
        // An image where a sound was asked for is decoded, and refused.
        #expect(judge("http://h/zvony.mp3", jpeg) == .checkSound(asked: true, otherwise: .sound))
    }

    @Test func aPhotoAskedForStaysAPhoto() {
        #expect(judge("http://h/p", kind: .photo, noise) == .store(.photo))
        #expect(judge("http://h/p.mp3", kind: .photo, wav) == .store(.photo))
    }

    @Test func aSoundsFactsJoinTheItemsOwn() throws {
        let facts = SoundFacts(format: "mp3", sampleRate: 44_100, channels: 1, frames: 88_200)
        let alone = try #require(JSONValue.members(ofObject: MediaKinds.metadata(nil, adding: facts)))
        #expect(alone == ["durationSeconds": .number("2.0"), "sampleRate": .number("44100"), "channels": .number("1"),
                          "format": .string("mp3")])
        // What the item came with wins (a feed's own title or duration).
        let given = try #require(JSONValue.members(ofObject: MediaKinds.metadata(#"{"id":"17","durationSeconds":2.5}"#, adding: facts)))
        #expect(given["id"] == .string("17"))
        #expect(given["durationSeconds"] == .number("2.5"))
        #expect(given["format"] == .string("mp3"))
    }
}
