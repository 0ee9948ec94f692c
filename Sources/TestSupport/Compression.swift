import CZlib
import Foundation

/// Bytes compressed by zlib, as a server sends a body it gzips or deflates.
public enum Compression {
    /// zlib's three framings of a deflate stream.
    public enum Format: Sendable {
        /// A gzip member (`Content-Encoding: gzip`).
        case gzip
        /// A zlib stream (`Content-Encoding: deflate` as HTTP defines it).
        case zlib
        /// A raw deflate stream (`deflate` as some servers send it).
        case raw
    }

    /// `data` compressed in `format` at zlib's default level.
    public static func compress(_ data: Data, _ format: Format) -> Data {
        var stream = z_stream()
        let windowBits: Int32 = switch format {
        case .gzip: 15 + 16
        case .zlib: 15
        case .raw: -15
        }
        guard mf_deflate_init2(&stream, Z_DEFAULT_COMPRESSION, windowBits) == Z_OK else { return Data() }
        defer { deflateEnd(&stream) }
        var input = [UInt8](data)
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 64)
        let produced = input.withUnsafeMutableBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target -> Int in
                stream.next_in = source.baseAddress
                stream.avail_in = UInt32(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = UInt32(target.count)
                guard deflate(&stream, Z_FINISH) == Z_STREAM_END else { return 0 }
                return target.count - Int(stream.avail_out)
            }
        }
        return Data(output.prefix(produced))
    }
}
