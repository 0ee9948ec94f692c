import Transfer

/// Which bodies sent with a `Content-Encoding` are decoded before they are
/// judged and stored (see `ContentDecoding`), and how a failed decoding is
/// said.
enum CodedBodies {
    /// The coding to undo for a body, or nil to take it as sent.
    ///
    /// Not for a compressed file by its URL's name (`a.tar.gz`, an `.svgz`
    /// image) or by its type (`application/gzip`): Apache's `AddEncoding
    /// x-gzip .gz` labels the file so, and the file is what was asked for.
    /// Nor for bytes the coding does not fit (see `ContentDecoding.coding`),
    /// nor, under `deflate`, for bytes that open as media: raw deflate has
    /// no signature, and a BMP sent with a false coding is stored as it is.
    static func codingToUndo(contentEncoding: String?, contentType: String?, url: String, redirectedTo: String?,
                             opening: () -> [UInt8]) -> ContentDecoding.Coding? {
        guard contentEncoding != nil,
              !namesACompressedFile(url), !(redirectedTo.map(namesACompressedFile) ?? false),
              !(PageInsteadOfMedia.mediaType(contentType).map(PageInsteadOfMedia.compressedTypes.contains) ?? false)
        else { return nil }
        let bytes = opening()
        guard let coding = ContentDecoding.coding(contentEncoding: contentEncoding, opening: bytes) else { return nil }
        if coding == .rawDeflate, BodyOpening.opensWithAMediaSignature(bytes) { return nil }
        return coding
    }

    /// Whether the URL's file name is a compressed file's.
    static func namesACompressedFile(_ url: String) -> Bool {
        PageInsteadOfMedia.fileExtension(of: url).map(compressedFileExtensions.contains) ?? false
    }

    /// Compressed files' extensions, images among them (`svgz`, and
    /// Windows metafiles: `emz`, `wmz`).
    static let compressedFileExtensions: Set<String> = ["gz", "tgz", "taz", "z", "svgz", "emz", "wmz"]

    /// Why a body that decodes to nothing is not stored.
    static func emptyRefusal(coding: ContentDecoding.Coding, contentType: String?, size: Int64) -> String {
        "the server sent a \(coding.name)-coded body that decodes to nothing (\(MediaKinds.typeAndSize(contentType, size)) as sent); "
            + "not stored"
    }

    /// Why a body whose coding failed to undo is not stored, in one line,
    /// as `MediaKinds` words its refusals: `maxFileSize` is the limit
    /// `--max-filesize` gave, if any.
    static func refusal(_ failure: DecodingFailure, coding: ContentDecoding.Coding, contentType: String?, size: Int64,
                        maxFileSize: Int64?) -> String {
        let sent = "\(MediaKinds.typeAndSize(contentType, size)) as sent"
        switch failure.kind {
        case .cutShort:
            return "the server sent a \(coding.name)-coded body cut short (\(failure.detail); \(sent)); not stored"
        case .tooLarge(let limit):
            let bound = maxFileSize != nil ? "the --max-filesize limit of \(ByteSize.format(limit))"
                : "\(ByteSize.format(limit)), the most a body of its size may decode to (a bigger limit: --max-filesize)"
            return "the server sent a \(coding.name)-coded body that decodes to more than \(bound) (\(sent)); not stored"
        case .damaged, .notThatCoding:
            return "the server sent a damaged \(coding.name)-coded body (\(failure.detail); \(sent)); not stored"
        case .stopped, .fileSystem:
            return "cannot undo its \(coding.name) coding: \(failure.detail)"
        }
    }
}
