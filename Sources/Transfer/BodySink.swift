import Foundation
import URLText

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A whole body (a 200) that answers a resume request (`Range`), as far as
/// it is known when its first bytes arrive.
public struct ResumeAnswer: Sendable {
    public let contentType: String?
    /// `Content-Encoding`, if a coding is named.
    public let contentEncoding: String?
    /// The body's first bytes: up to 512, and 32 at least unless the body
    /// is shorter (see `FileSink.answerJudgedBy`).
    public let opening: [UInt8]
    /// The first bytes (up to 512) of the bytes held, which the answer would
    /// replace: what the file looked like.
    public let held: [UInt8]
    /// The whole body's length, when all of it is in `opening`'s bytes (it
    /// ended before it was judged, or its `Content-Length` arrived whole);
    /// nil when the body goes on.
    public let wholeLength: Int64?
    /// The path the answer was redirected to last (`/files/3.jpg`); nil when it was not.
    public let redirectedTo: String?

    public init(contentType: String?, contentEncoding: String?, opening: [UInt8], held: [UInt8] = [], wholeLength: Int64? = nil,
                redirectedTo: String? = nil) {
        self.contentType = contentType
        self.contentEncoding = contentEncoding
        self.opening = opening
        self.held = held
        self.wholeLength = wholeLength
        self.redirectedTo = redirectedTo
    }
}

/// Asked when a server answers a resume request with a whole body, once its
/// first bytes arrive and before the bytes held give way to it: a reason to
/// refuse it as not the file, or nil to take it. A login page sent with 200
/// for a photo's URL otherwise replaced the photo's partial download, which
/// the next run then fetched from byte zero. A refused answer ends the
/// download with `.notTheFile`, and the bytes held and their validator stay
/// to be resumed. (Asked at the first bytes, not at the head: a server that
/// labels real photos `text/plain` sends the file all the same.)
public typealias ResumeAnswerCheck = @Sendable (ResumeAnswer) -> String?

/// What a sink did with body bytes handed to it.
enum BodyWrite: Equatable {
    /// Every byte was taken.
    case taken
    /// None was taken, for lack of memory to queue them for the disk: hand
    /// the same bytes again when the sink's `wakeWhenRoom` calls back.
    case full
    /// None need be handed again: the transfer ends with this error.
    case refused(TransferError)
}

/// Where a response body goes. Called on the engine's loop thread only.
protocol BodySink: AnyObject {
    /// Bytes already held from an earlier attempt or run; asked for with `Range`.
    var resumeOffset: Int64 { get }
    /// The validator that the held bytes belong to, sent as `If-Range`.
    var resumeValidator: String? { get }
    /// Made ready for an attempt that resumes from `resumeOffset`: returns
    /// how many of the last bytes held it asks for again, to compare (0: none).
    func prepareResume() -> Int64
    /// The final response's head is known and its body is about to arrive.
    /// Returns an error to abort the transfer (the body does not fit the request).
    func begin(_ head: ResponseHead, requestedOffset: Int64) -> TransferError?
    /// Body bytes: taken, refused with the error that aborts the transfer,
    /// or, when `mayPause`, not taken yet (`.full`, see `wakeWhenRoom`);
    /// without it the sink waits for room instead, until `giveUp` returns
    /// true (the transfer is being stopped), and then refuses them as
    /// `.cancelled`.
    func write(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite
    /// After a `.full` write: calls `wake` (on any thread, once) when the
    /// sink can take those bytes. Returns false, and never calls `wake`, when
    /// it can now.
    func wakeWhenRoom(_ wake: @escaping @Sendable () -> Void) -> Bool
    /// Bytes of the current body so far, including a resumed prefix.
    var bytesHeld: Int64 { get }
    /// Of the `offset` bytes held that an answer goes on from (a 206, or a
    /// 416 showing that every byte is held), those no earlier one of this
    /// body's counted: the run's "resumed" bytes count each body's furthest.
    func newlyResumed(upTo offset: Int64) -> Int64
    /// `newlyResumed`, once a 206's first bytes have shown it goes on from
    /// the bytes held (the last of them sent again match: see
    /// `prepareResume`); nil until then. Counted earlier, a resume refused
    /// by that check and fetched from byte zero was said to be resumed.
    func confirmedResume(upTo offset: Int64) -> Int64?
    /// Drops what is held so the next attempt starts from byte zero.
    func restart()
    /// The body's full size, when the response said it.
    var expectedTotal: Int64? { get }
    /// The attempt failed and the transfer may wait for a retry: release
    /// what is only needed while bytes arrive.
    func attemptFailed()
    /// The attempt was cancelled, and the transfer with it: bytes not yet
    /// written may be dropped. Must not wait.
    func attemptCancelled()
    /// The transfer completed: the body has no more bytes. Returns an error
    /// to end the attempt with instead of success. Called before the body is
    /// counted (`bytesHeld`) and sealed.
    func bodyEnded() -> TransferError?
    /// The file the body goes to, if any (see `PartialFile.markAlive`).
    var partialPath: String? { get }
    /// The attempt delivered the whole body: make it ready for the task, and
    /// call `resume` (on any thread) once it is, to wake the task.
    func attemptSucceeded(then resume: @escaping @Sendable () -> Void)
    /// When `head`, a 416 to the range request for what follows the bytes
    /// held, shows that every byte is held already (the file is exactly that
    /// long and still the version the validator names): the head to record
    /// the body with. Nil otherwise.
    func wholeBodyHeld(answeredBy head: ResponseHead) -> ResponseHead?
}

/// Streams a body into a partial file while hashing it with SHA-256, so the
/// finished file never needs a second read. Survives failed attempts: the
/// bytes written and the hash state carry over to the next `Range` request.
final class FileSink: BodySink {
    /// The 2xx statuses whose body is the file asked for, or a part of it;
    /// 204 has no body at all (`TransferEngine.emptyBody` names it). A
    /// `MemorySink` (`TransferEngine.fetch`) takes any final answer.
    static let statusesWithTheFile: Set<Int> = [200, 203, 204, 206]

    private let partial: PartialFile
    private let writer: HashingWriter
    private(set) var bytesHeld: Int64 = 0
    /// The furthest offset an answer went on from (see `newlyResumed`).
    private var resumedUpTo: Int64 = 0
    /// The file the body is written to.
    var partialPath: String? { partial.path }
    /// The body's first bytes (up to `openingSize`) as they arrived: a
    /// caller looks at them where a page may stand in for media, without
    /// reading back a file written past the page cache. Nil when they were
    /// held before this process (a resumed partial).
    private(set) var opening: [UInt8]? = []
    static let openingSize = 512
    /// The body's last bytes (up to `closingSize`), kept as they arrive
    /// (and from the bytes read back of a resumed partial): a caller checks
    /// a photo's end marker without reading the file. Only those that end
    /// at `bytesHeld` count (a failed attempt drops its last bytes).
    private var closingBytes: [UInt8] = []
    private var closingEnd: Int64 = 0
    static let closingSize = 32
    /// The last bytes of those held, as many as are known (up to `closingSize`).
    var closing: [UInt8] { closingEnd == bytesHeld ? closingBytes : [] }
    /// The partial held bytes of an earlier run when it was opened.
    var resumedFromEarlierRun: Bool { partial.resumable != nil }
    private(set) var validator: String?
    /// The body's whole length as the response `validator` came with gave
    /// it: a range answer for another length is another version, whatever
    /// its validator says (a file replaced by a longer one, its ETag or date
    /// kept, had its tail stitched to the old head). Nil when not given.
    private var validatorTotal: Int64?
    /// The redirects the response `validator` came with came through
    /// (`ResponseHead.route`): a range answer by another way is another file.
    private var validatorRoute = ""
    /// What the response the held bytes came with said of them: a body a
    /// 416 proves whole is stored with it (the 416 describes no body).
    private var validatorLabels = BodyLabels()
    private let maxFileSize: Int64?
    private let resumableThreshold: Int64
    /// Whether this attempt's body is being written (a 2xx); error bodies are dropped.
    private var accepting = false
    /// What the last accepted response said about the body.
    private(set) var head: ResponseHead?
    /// The bytes held when that response's body began (after a restart, 0).
    private var heldAtBegin: Int64 = 0

    private let budget: FinishedFile.Budget

    /// Asked before the bytes held give way to a whole new body (see `ResumeAnswerCheck`).
    private let resumeAnswerCheck: ResumeAnswerCheck?

    init(partial: PartialFile, maxFileSize: Int64?, resumableThreshold: Int64,
         budget: FinishedFile.Budget, directIO: Bool, chunkPool: ChunkPool = HashingWriter.pool,
         resumeAnswerCheck: ResumeAnswerCheck? = nil) throws(TransferError) {
        self.partial = partial
        self.resumeAnswerCheck = resumeAnswerCheck
        self.budget = budget
        self.maxFileSize = maxFileSize
        self.resumableThreshold = resumableThreshold
        // The writer uses direct I/O from an empty file on, or from a resumed
        // partial that ends on a block boundary; a resumed partial is read
        // back once to seed the hash.
        self.writer = HashingWriter(descriptor: partial.descriptor, path: partial.path, directIO: directIO,
                                    opened: partial.opened, pool: chunkPool)
        if let held = partial.resumable {
            // A partial left by an earlier run: its bytes are read once to
            // restore the hash state. Rare, and bounded by what is on disk.
            bytesHeld = try writer.seed(fromFileLength: held.size)
            if bytesHeld > 0 { opening = nil }
            recent = writer.seededTail
            recentEnd = bytesHeld
            closingBytes = Array(recent.suffix(Self.closingSize))
            closingEnd = bytesHeld
            validator = held.validator
            validatorTotal = held.total
            validatorRoute = held.route
            validatorLabels = held.labels
        }
    }

    /// What the final response said of the body, with what a range answer
    /// leaves out taken from the bytes it continues: after `If-Range` a 206
    /// need not repeat the representation's headers (RFC 9110 §15.3.7), and
    /// a gzipped body resumed by one that did not was stored still gzipped,
    /// for good. Nil before any response was taken.
    var labels: BodyLabels? {
        guard let head else { return nil }
        guard head.status == 206, heldAtBegin > 0 else { return BodyLabels(of: head) }
        return BodyLabels(contentType: head.contentType ?? validatorLabels.contentType,
                          contentEncoding: head.contentEncoding ?? validatorLabels.contentEncoding)
    }

    var resumeOffset: Int64 { validator == nil ? 0 : bytesHeld }
    var resumeValidator: String? { validator }

    /// How many of the last bytes held a resume asks for again. A range
    /// answer must send them as they are held before its new bytes are
    /// taken: a server that puts another file of the same length under the
    /// same validator (an ETag of size and time kept by a deploy, one empty
    /// or the same for every file) had one version's head stitched to
    /// another's tail, and a 206 that vouched for it passed every other check.
    static let resumeOverlap = 4096
    /// The bytes a resume's answer must open with (see `resumeOverlap`),
    /// taken for the attempt about to ask.
    private var overlap = Echo()
    /// The last bytes written (up to `recentCapacity`), ending at byte
    /// `recentEnd`, of a body long enough to be resumed: the overlap is taken
    /// from memory, not read back from the disk by the task that asks (a wait
    /// for the writer on Swift's shared threads). Twice the overlap: a failed
    /// attempt drops less than a block of what it got.
    private var recent: [UInt8] = []
    private var recentEnd: Int64 = 0
    static let recentCapacity = 2 * resumeOverlap
    /// A 200 that answers a resume, while its first bytes may still be the
    /// last ones held (the range asked, sent as if it were the whole file).
    private var tailProbe = Echo()

    /// Bytes a body is to open with, compared as they come.
    private struct Echo {
        var expected: [UInt8] = []
        /// How many have come as expected.
        var matched = 0
        /// Whether some are still to come.
        var isPending: Bool { matched < expected.count }

        /// Compares the next of them with the first of `bytes`: how many
        /// matched (all `bytes` had, or all that were left), nil at a difference.
        mutating func match(_ bytes: UnsafeRawBufferPointer) -> Int? {
            let count = min(expected.count - matched, bytes.count)
            guard bytes.prefix(count).elementsEqual(expected[matched..<matched + count]) else { return nil }
            matched += count
            return count
        }
    }

    func prepareResume() -> Int64 {
        overlap = Echo()
        // Not for a few blocks held: little is lost if they start over. (The
        // bytes kept cover the last held but after a cancel, which ends the transfer.)
        let count = Self.resumeOverlap
        let start = bytesHeld - Int64(count)
        guard bytesHeld >= 2 * Int64(count), recentEnd >= bytesHeld, recentEnd - Int64(recent.count) <= start else { return 0 }
        let from = recent.count - Int(recentEnd - start)
        overlap = Echo(expected: Array(recent[from..<(from + count)]))
        return Int64(count)
    }

    /// Keeps the last bytes of a write just taken, which ends at byte `end` (see `recent`).
    private func remember(_ bytes: UnsafeRawBufferPointer, endingAt end: Int64) {
        let capacity = Self.recentCapacity
        let start = end - Int64(bytes.count)
        if recentEnd != start {
            // What is kept must end where these begin: a failed attempt's last
            // bytes were dropped since (cut to a block), or some were not kept.
            let over = recentEnd - start
            if over > 0, over <= Int64(recent.count) { recent.removeLast(Int(over)) } else { recent = [] }
        }
        if bytes.count >= capacity {
            recent = Array(bytes.suffix(capacity))
        } else {
            let overflow = recent.count + bytes.count - capacity
            if overflow > 0 { recent.removeFirst(overflow) }
            recent.append(contentsOf: bytes)
        }
        recentEnd = end
    }

    func newlyResumed(upTo offset: Int64) -> Int64 {
        defer { resumedUpTo = max(resumedUpTo, offset) }
        return max(0, offset - resumedUpTo)
    }

    func confirmedResume(upTo offset: Int64) -> Int64? {
        overlap.isPending ? nil : newlyResumed(upTo: offset)
    }

    func begin(_ head: ResponseHead, requestedOffset: Int64) -> TransferError? {
        guard (200...299).contains(head.status) else {
            accepting = false
            return nil
        }
        guard Self.statusesWithTheFile.contains(head.status) else {
            // 202 "accepted, not made yet", 205, 207's WebDAV listing, 226's delta: none is the file itself.
            let reason = head.reason.isEmpty ? "" : " \(head.reason)"
            return TransferError(.http(status: head.status),
                                 "HTTP \(head.status)\(reason): the server sent no file (only 200, 203 and 206 carry one); not stored")
        }
        // Where the range asked began (see `resumeOverlap`). Only a 206 goes on
        // from the bytes held, and sends the last of them again first.
        let askedFrom = requestedOffset - Int64(overlap.expected.count)
        let overlapAsked = overlap.expected
        tailProbe = Echo()
        overlap = head.status == 206 && requestedOffset > 0 ? Echo(expected: overlapAsked) : Echo()
        // A 206 that carries the whole file though no range was asked (some
        // servers and CDNs answer so): the file, as a 200 would be. It was
        // refused and asked again five times, to the same answer.
        var wholeFileIn206: Int64?
        if head.status == 206, requestedOffset == 0, let range = head.contentRange, range.start == 0,
           let total = range.total, range.end == total - 1, head.contentLength.map({ $0 == total }) ?? true {
            wholeFileIn206 = total
        }
        if head.status == 206, wholeFileIn206 == nil {
            // `contentRange` is ordered and inside the file, so `total - 1` and
            // the range's length cannot overflow whatever the server sent.
            guard requestedOffset > 0, requestedOffset == bytesHeld, let range = head.contentRange,
                  range.start == askedFrom, let total = range.total, range.end == total - 1,
                  head.contentLength.map({ $0 == range.end - range.start + 1 }) ?? true else {
                // Not the rest of the file we asked for: drop what we hold, so
                // the retry asks for the whole body instead of the same range.
                restart()
                return TransferError(.protocolViolation, "server answered with a range that was not asked for")
            }
            if head.route != validatorRoute {
                // The URL redirected elsewhere than when the bytes held came:
                // an ETag names a version of one file, not which file.
                restart()
                return TransferError(.protocolViolation, "the URL now redirects to another file than the bytes held came from")
            }
            if !validatorStillMatches(head, absentMeans: false) {
                // The file changed although we sent If-Range, or the 206 does not
                // say which version it is from: never stitch two versions.
                let said = theirValidator(head) != nil
                restart()
                return TransferError(.protocolViolation, said ? "the file changed on the server while resuming"
                    : "the server's range answer did not say which version of the file it is from")
            }
            if total < requestedOffset {
                // Shorter than the bytes held (a file shrunk under the same validator):
                // its range may end within those sent again, and the body cannot go on.
                restart()
                return TransferError(.protocolViolation, "the file changed on the server while resuming "
                    + "(\(total) bytes long now, \(requestedOffset) held)")
            }
            if let known = validatorTotal, known != total {
                restart()
                return TransferError(.protocolViolation, "the file changed on the server while resuming "
                    + "(\(total) bytes long now, \(known) before, under the same validator)")
            }
            if validatorTotal == nil, let validator {
                // The first length given (the body began chunked, with none): later range answers are held to it.
                validatorTotal = total
                partial.recordValidator(validator, total: total, route: validatorRoute, labels: validatorLabels)
            }
            expectedTotal = total
        } else {
            // (RFC 9110 gives a Content-Range no meaning beside a 200: only one
            // that says the body is a part of the file, and not all of it, counts;
            // one past the file's start whatever its total, `*` too, and answering
            // a resume, one that cannot be read.)
            let saysPart: Bool
            if let range = head.contentRange {
                saysPart = range.total.map { !(range.start == 0 && range.end + 1 == $0) && head.contentLength != $0 } ?? (range.start > 0)
            } else {
                saysPart = requestedOffset > 0 && head.fields["content-range"] != nil
            }
            if saysPart {
                // A 200 is the whole file, yet it says it is a part: a server that
                // answered a resume so had the tail stored as the whole file.
                restart()
                return TransferError(.protocolViolation, "the server answered \(head.status) with a part of the file "
                    + "(Content-Range: \(head.fields["content-range"] ?? ""))")
            }
            if requestedOffset > 0, let known = validatorTotal, let length = head.contentLength, length != known,
               length == known - askedFrom || length == known - requestedOffset {
                // Just as many bytes as the range asked, under a 200: the rest of
                // the file, sent as if it were all of it (else stored as the file).
                restart()
                return TransferError(.protocolViolation, "the server answered \(head.status) with \(length) bytes, just what "
                    + "was left of \(known) from byte \(length == known - askedFrom ? askedFrom : requestedOffset): "
                    + "the rest of the file, not all of it")
            }
            var total = head.contentLength ?? wholeFileIn206 ?? (head.status == 200 ? head.lengthBesideChunks : nil)
            if bytesHeld > 0, let known = validatorTotal, validatorStillMatches(head, absentMeans: false) {
                // The version the bytes held are of, sent whole (the range ignored):
                // its length is known. One that ends sooner was cut short (a body
                // ended by the connection's close was stored truncated), and
                // another length under the same validator is another file.
                if let total, total != known {
                    restart()
                    return TransferError(.protocolViolation, "the file changed on the server while resuming "
                        + "(\(total) bytes long now, \(known) before, under the same validator)")
                }
                total = known
            }
            if bytesHeld > 0, validatorTotal == nil, let total, total < bytesHeld, validatorStillMatches(head, absentMeans: false) {
                // Shorter, under the same validator, than what is held of it (its
                // first length was not given): the rest of it, not all of it.
                restart()
                return TransferError(.protocolViolation, "the server answered \(head.status) with \(total) bytes under the "
                    + "validator of the \(requestedOffset) held: the rest of the file, not all of it")
            }
            // The rest of the file sent as a 200 from the start asked shows in its
            // first bytes: the last ones held, sent again (see `write`). (Kept past
            // the restart that drops the bytes held, now or once the answer is judged.)
            if requestedOffset > 0, bytesHeld > 0 { tailProbe = Echo(expected: overlapAsked) }
            if bytesHeld > 0 {
                // 200 to a range request: the server sends the whole (maybe new)
                // body, unless it is no file at all (a login page). Which it is
                // shows in its first bytes: until then the bytes held, their
                // validator and their head stay as they are (see `PendingAnswer`).
                // Only bytes a later run could resume are worth the wait (a
                // refusal says they are kept): a body the validator file is
                // written for, and enough of it to outlive trimming to blocks.
                // (Asked for the whole body, as a server refused resumes, it answers one all the same.)
                if resumeOffset > 0, resumeAnswerCheck != nil, bytesHeld >= resumableThreshold,
                   (validatorTotal ?? .max) >= resumableThreshold {
                    pendingAnswer = PendingAnswer(head: head, total: total)
                } else {
                    restart()
                }
            } else {
                // A new response: a validator an earlier attempt recorded (its
                // body cut off before any byte arrived) belongs to another
                // version, and must not vouch for this one's bytes.
                partial.forgetValidator()
            }
            if pendingAnswer == nil { expectedTotal = total }
        }
        if let limit = maxFileSize, let total = pendingAnswer?.total ?? expectedTotal, total > limit {
            return .tooLarge(limit: limit, announced: total)
        }
        accepting = true
        guard pendingAnswer == nil else { return nil }
        self.head = head
        heldAtBegin = bytesHeld
        if head.status != 206 || wholeFileIn206 != nil {
            takeValidator(of: head)
        }
        return nil
    }

    /// Makes `head`'s validator the one the body's bytes are resumed by.
    private func takeValidator(of head: ResponseHead) {
        // If-Range takes a strong ETag or a strong date; a weak ETag would never match.
        // An empty one (`""`, some frameworks' for every response) names no version.
        let strongETag = head.etag.flatMap { $0.hasPrefix("\"") && $0.count > 2 ? $0 : nil }
        let newValidator = strongETag ?? Self.strongLastModified(head)
        validator = newValidator
        validatorTotal = expectedTotal
        validatorRoute = head.route
        validatorLabels = BodyLabels(of: head)
        if let newValidator, (expectedTotal ?? .max) >= resumableThreshold {
            partial.recordValidator(newValidator, total: expectedTotal, route: validatorRoute, labels: validatorLabels)
        }
    }

    /// A whole body that answered a resume while it is judged (see
    /// `ResumeAnswerCheck`): its head, its length, and its first bytes, held
    /// here as they arrive. Until it is decided, the bytes held, their
    /// validator, `head` and `expectedTotal` are still the held bytes' own.
    private struct PendingAnswer {
        let head: ResponseHead
        let total: Int64?
        var opening: [UInt8] = []
    }
    private var pendingAnswer: PendingAnswer?

    /// How many first bytes an answer to a resume is judged by, unless it
    /// ends sooner: enough for a media file's opening to show its signature
    /// or a byte no text has (a WAV's `RIFF`, its length and `WAVEfmt ` may
    /// all be printable; the bytes after them are not). A first write is
    /// most often more.
    static let answerJudgedBy = 32

    /// Bytes of an answer taken after it was judged, still to be written
    /// before any byte that follows them (held by earlier writes, while it
    /// was judged; the writer had no room when it was taken).
    private var carried: [UInt8] = []

    /// Judges an answer to a resume by its first bytes: refused (the error
    /// ends the transfer; the bytes held stay), or taken in place of the
    /// bytes held, which then start over from byte zero with its validator.
    /// `ended`: the body ended with the bytes pending.
    private func judge(_ pending: PendingAnswer, ended: Bool = false) -> TransferError? {
        let received = Int64(pending.opening.count)
        let answer = ResumeAnswer(contentType: pending.head.contentType, contentEncoding: pending.head.contentEncoding,
                                  opening: Array(pending.opening.prefix(Self.openingSize)),
                                  held: opening ?? writer.seededOpening,
                                  wholeLength: ended || pending.total == received ? received : nil,
                                  redirectedTo: pending.head.lastRedirectPath)
        if let refusal = resumeAnswerCheck?(answer) {
            accepting = false
            return TransferError(.notTheFile, refusal)
        }
        restart()
        head = pending.head
        expectedTotal = pending.total
        heldAtBegin = 0
        takeValidator(of: pending.head)
        return nil
    }

    /// `Last-Modified` when it may be sent as `If-Range`: RFC 9110 (8.8.2.2,
    /// 13.1.5) counts a date as a strong validator only when the response
    /// says it was made a second or more after it (`Date`), so that a file
    /// changed twice within one second cannot pass for the first version.
    /// Nor a date before 1990: a tree whose files all carry the same early
    /// date (reproducible builds' 1970, a store's mtime of 1) dates no version.
    static func strongLastModified(_ head: ResponseHead) -> String? {
        guard let value = head.lastModified, let modified = HTTPDate.date(value), modified >= earliestTrustedDate,
              let made = head.date.flatMap(HTTPDate.date), made.timeIntervalSince(modified) >= 1 else { return nil }
        return value
    }

    /// 1990-01-01: earlier modification dates are taken for placeholders (see `strongLastModified`).
    static let earliestTrustedDate = Date(timeIntervalSince1970: 631_152_000)

    func wholeBodyHeld(answeredBy head: ResponseHead) -> ResponseHead? {
        // Only a body known to be that long: a partial cut off (by a dropped
        // connection, or from a body of unknown length) is not the whole file
        // because a server says its length is what we hold.
        guard bytesHeld > 0, let validator, validatorTotal == bytesHeld,
              head.status == 416, head.unsatisfiedRangeLength == bytesHeld, head.route == validatorRoute,
              // A server that ignores If-Range answers 416 for a changed file of
              // the same length too. One that honours it answers 416 only when the
              // validator matched, and need not repeat it in a 416: absent is trusted.
              validatorStillMatches(head, absentMeans: true) else { return nil }
        if let limit = maxFileSize, bytesHeld > limit { return nil }
        // The 416 describes no body; the validator the held bytes came with is known.
        var held = ResponseHead()
        held.consume(line: "HTTP/1.1 200 OK")
        held.consume(line: Substring((validator.hasPrefix("\"") ? "ETag: " : "Last-Modified: ") + validator))
        if let type = validatorLabels.contentType { held.consume(line: Substring("Content-Type: " + type)) }
        if let coding = validatorLabels.contentEncoding { held.consume(line: Substring("Content-Encoding: " + coding)) }
        held.consume(line: "")
        return held
    }

    /// A 206 must come from the same version of the file as the bytes held:
    /// compare whichever validator was sent as If-Range with what the server
    /// says now; `absentMeans` when the response does not say. A 206 must
    /// carry the ETag a 200 would (RFC 9110, 15.3.7), so one without it
    /// cannot vouch for its bytes: a server that sent v2's tail without an
    /// ETag after v1's head was cut off had the two stitched together.
    ///
    /// RFC 9110 does not require a 206 to repeat Last-Modified, so a server
    /// with dates only that leaves it out costs a download from byte zero on
    /// each resume: the price of never stitching (Apache and nginx repeat it).
    private func validatorStillMatches(_ head: ResponseHead, absentMeans: Bool) -> Bool {
        guard let ours = validator else { return false }
        return theirValidator(head).map { $0 == ours } ?? absentMeans
    }

    /// The response's validator of the kind that was sent as If-Range.
    private func theirValidator(_ head: ResponseHead) -> String? {
        guard let ours = validator else { return nil }
        return ours.hasPrefix("\"") ? head.etag : head.lastModified
    }

    private(set) var expectedTotal: Int64?

    func attemptFailed() {
        // An answer to a resume that ended while it was judged replaced nothing.
        pendingAnswer = nil
        overlap = Echo()
        carried = []
        bytesHeld -= Int64(writer.submitFilling(endingAt: bytesHeld, attemptStart: heldAtBegin))
    }

    func attemptCancelled() {
        pendingAnswer = nil
        overlap = Echo()
        carried = []
        bytesHeld -= Int64(writer.cancelUnwritten(keepingFillingEndingAt: bytesHeld, attemptStart: heldAtBegin))
    }

    func bodyEnded() -> TransferError? {
        guard accepting else { return nil }
        if overlap.isPending {
            // Not the rest of the file: the next attempt asks for all of it. (But a
            // range answer of no length of its own, whose connection broke there.)
            if head?.endsWithItsConnection == false { restart() }
            return TransferError(.protocolViolation, "the answer to the resume ended within the bytes already held")
        }
        if let pending = pendingAnswer {
            pendingAnswer = nil
            // No byte: it replaced nothing, and ends as any empty body does
            // (retried, never stored), the bytes held kept for the retry.
            if pending.opening.isEmpty { return TransferEngine.emptyBody(pending.head) }
            // Fewer bytes than it is judged by: judged by all it sent.
            if let error = judge(pending, ended: true) { return error }
            carried = pending.opening
        }
        // A few bytes, at the end of the body: waited for rather than paused.
        if case .refused(let error) = writeCarried(mayPause: false, giveUp: { false }) { return error }
        return nil
    }

    /// Writes the bytes `carried` holds, if any; they are gone once taken.
    private func writeCarried(mayPause: Bool, giveUp: () -> Bool) -> BodyWrite {
        guard !carried.isEmpty else { return .taken }
        let result = carried.withUnsafeBytes { writeBody($0, mayPause: mayPause, giveUp: giveUp) }
        if result == .taken { carried = [] }
        return result
    }

    /// Hashing and writing the last chunk happen on the writer queue, which
    /// wakes the task when the digest is ready. (An answer to a resume was
    /// judged or refused by `bodyEnded`: the bytes held are never sealed as it.)
    func attemptSucceeded(then resume: @escaping @Sendable () -> Void) {
        writer.seal(then: resume)
    }

    func write(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite {
        guard accepting else { return .taken }
        if overlap.isPending {
            // The bytes held, sent again: compared, not written.
            guard let count = overlap.match(bytes) else {
                let held = bytesHeld
                restart()
                return .refused(TransferError(.protocolViolation, "the file changed on the server while resuming: "
                    + "the bytes before byte \(held) it sent again are not those held"))
            }
            guard count < bytes.count else { return .taken }
            let rest = write(UnsafeRawBufferPointer(rebasing: bytes[count...]), mayPause: mayPause, giveUp: giveUp)
            // Held back: libcurl hands the whole write again, these bytes first.
            if rest == .full { overlap.matched -= count }
            return rest
        }
        var probed = 0
        if tailProbe.isPending, !bytes.isEmpty {
            if let count = tailProbe.match(bytes) {
                probed = count
                if !tailProbe.isPending {
                    restart()
                    return .refused(TransferError(.protocolViolation, "the server answered the resume with a 200 that opens "
                        + "with the last bytes held: the rest of the file, not all of it"))
                }
            } else {
                tailProbe = Echo()
            }
        }
        let result = writeAnswer(bytes, mayPause: mayPause, giveUp: giveUp)
        // Held back: libcurl hands the whole write again, these bytes first.
        if result == .full { tailProbe.matched -= probed }
        return result
    }

    /// `write` for a body's bytes past those sent again of a resume's.
    private func writeAnswer(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite {
        if var pending = pendingAnswer {
            guard !bytes.isEmpty else { return .taken }
            // Held here until there are enough to judge the answer by.
            let earlier = pending.opening
            pending.opening.append(contentsOf: bytes)
            guard pending.opening.count >= Self.answerJudgedBy else {
                pendingAnswer = pending
                return .taken
            }
            pendingAnswer = nil
            if let error = judge(pending) { return .refused(error) }
            // Taken: the bytes held for it go first (this write's follow, below).
            carried = earlier
        }
        // Not taken (no room): libcurl hands this write's bytes again, and they follow these then.
        let result = writeCarried(mayPause: mayPause, giveUp: giveUp)
        guard result == .taken else { return result }
        return writeBody(bytes, mayPause: mayPause, giveUp: giveUp)
    }

    /// Writes body bytes in order, after the bytes held.
    private func writeBody(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite {
        if let limit = maxFileSize, bytesHeld + Int64(bytes.count) > limit { return .refused(.tooLarge(limit: limit)) }
        let answer = writer.write(bytes, expectedRemaining: expectedTotal.map { $0 - bytesHeld }, mayPause: mayPause,
                                  giveUp: giveUp)
        if answer == .taken {
            if bytesHeld < Self.openingSize, opening != nil {
                opening?.append(contentsOf: bytes.prefix(Self.openingSize - Int(bytesHeld)))
            }
            // The last bytes: those kept go on only where these continue them. (In place: this
            // runs at each of libcurl's writes, on the thread every body passes through.)
            if bytes.count >= Self.closingSize || closingEnd != bytesHeld { closingBytes.removeAll(keepingCapacity: true) }
            closingBytes.append(contentsOf: bytes.suffix(Self.closingSize))
            if closingBytes.count > Self.closingSize { closingBytes.removeFirst(closingBytes.count - Self.closingSize) }
            bytesHeld += Int64(bytes.count)
            closingEnd = bytesHeld
            if (expectedTotal ?? .max) >= resumableThreshold { remember(bytes, endingAt: bytesHeld) }
        }
        return answer
    }

    func wakeWhenRoom(_ wake: @escaping @Sendable () -> Void) -> Bool {
        writer.wakeWhenRoom(wake)
    }

    func restart() {
        writer.reset()
        partial.forgetValidator()
        overlap = Echo()
        recent = []
        recentEnd = 0
        closingBytes = []
        closingEnd = 0
        bytesHeld = 0
        opening = []
        validator = nil
        validatorTotal = nil
    }

    /// The finished body, still guarded from other processes, with its digest.
    func finish() async throws(TransferError) -> (file: FinishedFile, sha256: String, size: Int64) {
        let digest = try await writer.finish()
        return try finished(digest: digest)
    }

    /// `finish()` for a body the loop sealed (`AttemptOutcome.sealed`), without
    /// waiting: the digest is ready. Call it where the attempt's `onEnd` ran.
    func finishSealed() throws(TransferError) -> (file: FinishedFile, sha256: String, size: Int64) {
        guard let sealed = writer.sealed else {
            preconditionFailure("finishSealed() before the body was sealed")
        }
        return try finished(digest: sealed.get())
    }

    private func finished(digest: String) throws(TransferError) -> (file: FinishedFile, sha256: String, size: Int64) {
        let file = try partial.complete(budget: budget)
        return (file, digest, bytesHeld)
    }

    /// Gives up on the body; a resumable partial is kept for a later run
    /// unless `discard`. With `cancelled`, bytes not yet on their way to the
    /// disk are dropped rather than waited for (the partial keeps a prefix).
    func close(discard: Bool, cancelled: Bool = false) {
        if cancelled { writer.abandonUnwritten() } else { writer.drain() }
        partial.close(discard: discard)
    }
}

extension BodySink {
    func prepareResume() -> Int64 { 0 }
    func newlyResumed(upTo offset: Int64) -> Int64 { 0 }
    func confirmedResume(upTo offset: Int64) -> Int64? { 0 }
    func bodyEnded() -> TransferError? { nil }
    var partialPath: String? { nil }
}

/// Collects a small body in memory (API responses), with a size cap.
final class MemorySink: BodySink {
    private let limit: Int
    private(set) var data = Data()
    private(set) var head: ResponseHead?

    init(limit: Int) { self.limit = limit }

    var resumeOffset: Int64 { 0 }
    var resumeValidator: String? { nil }
    var bytesHeld: Int64 { Int64(data.count) }

    func begin(_ head: ResponseHead, requestedOffset: Int64) -> TransferError? {
        data.removeAll(keepingCapacity: true)
        self.head = head
        return nil
    }

    func restart() {
        data.removeAll()
    }

    var expectedTotal: Int64? { nil }

    func attemptFailed() {}

    func attemptCancelled() {}

    func attemptSucceeded(then resume: @escaping @Sendable () -> Void) {
        resume()
    }

    func wholeBodyHeld(answeredBy head: ResponseHead) -> ResponseHead? { nil }

    func write(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite {
        guard data.count + bytes.count <= limit else {
            return .refused(TransferError(.tooLarge, "response larger than \(limit) bytes"))
        }
        data.append(contentsOf: bytes)
        return .taken
    }

    /// Never full.
    func wakeWhenRoom(_ wake: @escaping @Sendable () -> Void) -> Bool { false }
}

