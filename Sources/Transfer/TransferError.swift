import Foundation

/// Why a transfer failed, in words a person can act on, and whether trying
/// again could help.
public struct TransferError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broad cause.
    public enum Kind: Sendable, Equatable {
        /// The server answered with this HTTP status.
        case http(status: Int)
        /// Connection-level failure (refused, reset, DNS, TLS), with the `CURLcode`.
        case network(curlCode: Int)
        /// Connect, stall or total timeout.
        case timeout
        /// The body is larger than `--max-filesize`.
        case tooLarge
        /// Not an http or https URL, or not a URL at all.
        case unsupportedURL
        /// More redirects than allowed.
        case tooManyRedirects
        /// The server's answer does not fit what was asked (a bad Content-Range, a changed validator).
        case protocolViolation
        /// Writing the body to disk failed.
        case fileSystem(errno: Int32)
        /// The transfer was cancelled.
        case cancelled
        /// libcurl could not be set up for the transfer.
        case engine
        /// The server's TLS certificate is not trusted (or the local TLS setup
        /// is broken): asking again gets the same certificate.
        case certificate(curlCode: Int)
        /// The server did not answer the TLS handshake in TLS (plain HTTP on
        /// the port of an `https` URL): asking again gets the same answer.
        case notTLS
        /// Not tried (or not tried again): the host was given up. Every
        /// attempt at it failed without an answer for a while (see
        /// `HostReachability`), or it asked to wait longer than mediafetch
        /// waits (see `HostRateLimits`).
        case hostGivenUp
        /// The server answered a resume with something the caller's
        /// `ResumeAnswerCheck` says is not the file (a login or error page
        /// where media was asked for): the bytes held are kept for a later
        /// run, and asking again now gets the same answer.
        case notTheFile
    }

    public let kind: Kind
    /// One line, naming what went wrong.
    public let message: String
    /// Seconds the server asked us to wait (`Retry-After`), when it did.
    public let retryAfter: Double?

    public init(_ kind: Kind, _ message: String, retryAfter: Double? = nil) {
        self.kind = kind
        self.message = message
        self.retryAfter = retryAfter
    }

    /// Connection errors, timeouts, 408, 429 and 5xx can pass; other 4xx, bad
    /// URLs, size limits and disk errors will not.
    public var isRetryable: Bool {
        switch kind {
        case .http(let status): return status == 408 || status == 429 || (500...599).contains(status)
        case .network, .timeout, .protocolViolation: return true
        case .tooLarge, .unsupportedURL, .tooManyRedirects, .fileSystem, .cancelled, .engine, .certificate, .notTLS, .hostGivenUp,
             .notTheFile:
            return false
        }
    }

    public var description: String { message }

    /// Writing the body failed because the disk is full (no space, or the quota spent).
    public var isOutOfSpace: Bool {
        guard case .fileSystem(let code) = kind else { return false }
        return code == ENOSPC || code == EDQUOT
    }

    static let cancelled = TransferError(.cancelled, "cancelled")
}

extension TransferError {
    /// A body over `--max-filesize`, whether libcurl (from Content-Length) or the sink (counting) found it.
    /// Both in the units a size is given in (`1M` read as 1048576 bytes was not
    /// recognised), and the size the server gave when it did.
    /// `held`: bytes an earlier run left, past the limit (no request was made):
    /// the line gave no size, nor said why nothing was asked.
    static func tooLarge(limit: Int64, announced: Int64? = nil, held: Int64? = nil) -> TransferError {
        // Each size in bytes too where rounding would show it as the other.
        let size = announced.map { announced in
            let text = ByteSize.format(announced)
            return ": the server gave its size as " + (text == ByteSize.format(limit) ? "\(text) (\(announced) bytes)" : text)
        } ?? held.map { held in
            let text = ByteSize.format(held)
            return ": \(text == ByteSize.format(limit) ? "\(text) (\(held) bytes)" : text) of it held from an earlier run, "
                + "kept for a run without the limit (nothing asked of the server)"
        } ?? ""
        return TransferError(.tooLarge, "larger than the --max-filesize limit of \(exactSize(limit))\(size)")
    }

    /// `ByteSize.format`, with the bytes beside it where the text does not
    /// read back as them (a limit of 1025 bytes is no "1.0 KiB").
    private static func exactSize(_ bytes: Int64) -> String {
        let text = ByteSize.format(bytes)
        return ByteSize.parse(text.filter { $0 != " " }) == bytes ? text : "\(text) (\(bytes) bytes)"
    }
}
