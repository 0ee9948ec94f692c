import ArgumentParser
import CProcessStart
import Foundation
import Synchronization
import MediaFetch
import Transfer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writing to the terminal; the only place that knows about stderr and ttys.
enum Terminal {
    /// One line on stderr, whatever the message holds: a line break in it
    /// (one in a URL or a file's name) is shown as an escape, `\u{A}`, as
    /// other control characters are. (Joined with a space, `a\nb.jpg` read
    /// as a file named `a b.jpg`.)
    static func error(_ message: String, progress: ProgressMode? = nil) {
        if progress == .json {
            // Under --progress json every stderr line is a JSON object, the run's end too (redacted there).
            writeErr(ProgressJSON.error(message) + "\n")
        } else {
            // Above the status line, where one is shown (a failure mid-run).
            StatusLine.shared.writeAbove("mediafetch: \(DisplayText.escapingControls(RedactedURL.inText(message)))\n")
        }
    }

    /// One line on stderr about how the run goes ahead despite what was asked.
    /// As a `{"event":"note"}` JSON line under `--progress json`, where every
    /// stderr line is a JSON object.
    static func notice(_ message: String, progress: ProgressMode) {
        if progress == .json {
            writeErr(ProgressJSON.note(message) + "\n")
        } else {
            // A status line may be showing (a note comes mid-run, from a lock
            // wait): the note goes above it, and it is drawn again at once
            // (during the wait nothing changes that would redraw it).
            StatusLine.shared.writeAbove("mediafetch: note: \(message)\n")
        }
    }

    /// Writes to stderr. A stderr that refuses it (a full disk behind
    /// `2>>job.log`) is left at that: there is nowhere left to say so, and the
    /// run, its cache and its exit status are worth more than the message.
    static func writeErr(_ text: String) {
        guard write(text, to: STDERR_FILENO) == EPIPE,
              let stop = whenStderrIsGone.withLock({ stop in defer { stop = nil }; return stop }) else { return }
        stop()
    }

    /// Called once (from the thread that found it) when stderr's reader has
    /// gone (a pipe to `head` or a pager that was quit): a run stops as on
    /// SIGHUP, what finished stored. With SIGPIPE, a run died mid-way, its
    /// finished bodies left unrecorded (see `FetchRunner`, which ignores it).
    static let whenStderrIsGone = Mutex<(@Sendable () -> Void)?>(nil)

    /// Writes a command's output to stdout; when stdout refuses it (a full
    /// disk behind `> list.txt`), says so in one line and exits with
    /// `Exit.outputFailed` instead of leaving a cut-short file unremarked.
    static func writeOut(_ text: String) throws(ExitCode) {
        if mf_standard_descriptor_was_closed(STDOUT_FILENO) != 0 {
            error(outputFailure(EBADF))
            throw Exit.outputFailed
        }
        let failure = write(text, to: STDOUT_FILENO)
        guard failure == 0 else {
            error(outputFailure(failure))
            throw Exit.outputFailed
        }
    }

    /// "cannot write the output: …" for `code`; a closed standard output
    /// (whose placeholder refuses writes with EBADF) said by name, not as a
    /// bad descriptor.
    static func outputFailure(_ code: Int32) -> String {
        let closed = code == EBADF && mf_standard_descriptor_was_closed(STDOUT_FILENO) != 0
        return "cannot write the output: \(closed ? "standard output is closed" : String(cString: strerror(code)))"
    }

    /// Writes all of `text` to `fd`; returns 0, or the `errno` of the
    /// descriptor's refusal. (FileHandle's `write(_: Data)` traps instead.)
    /// One message at a time: a pipe takes a write whole only up to 4 KiB,
    /// and a JSON progress line (which lists the running URLs) may be longer,
    /// so a note from another thread could land inside it.
    private static func write(_ text: String, to fd: Int32) -> Int32 {
        writing.withLock { _ in writeAll(text, to: fd) }
    }

    /// The project's sleeping lock, not `Mutex`, which spins before it sleeps.
    private static let writing = SleepingLock(())

    private static func writeAll(_ text: String, to fd: Int32) -> Int32 {
        var text = text
        return text.withUTF8 { bytes -> Int32 in
            guard let base = bytes.baseAddress else { return 0 }
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(fd, base + offset, bytes.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += count
            }
            return 0
        }
    }

    /// The bytes of a C string, as the kernel passed them (arguments, the environment).
    static func bytes(of text: UnsafePointer<CChar>) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: strlen(text))
    }

    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Whether `--progress auto` shows a status line: stderr is a terminal
    /// that can erase a line (`TERM=dumb`, as in an Emacs shell buffer,
    /// cannot: each redraw would pile up on one line).
    static var showsStatusLine: Bool {
        guard stderrIsTerminal else { return false }
        return getenv("TERM").map { String(cString: $0) != "dumb" } ?? true
    }

    /// The width of the terminal on stderr now (asked at each redraw, so a
    /// resized window is followed), or nil when it is not a terminal.
    static var stderrColumns: Int? { columns(of: STDERR_FILENO) }

    /// The width of the terminal on stdout, or nil when it is not one (a pipe, a file).
    static var stdoutColumns: Int? { columns(of: STDOUT_FILENO) }

    private static func columns(of descriptor: Int32) -> Int? {
        var size = winsize()
        guard ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }
}

/// Flushes what `print` left in stdout's buffer (help, `--version`); at exit
/// a stdout that refuses it (`mediafetch --help > /dev/full`) would otherwise
/// fail unseen with status 0. Says so and exits with `Exit.outputFailed`.
/// Given to `atexit`, so a plain function: a closure in `main` would be
/// isolated to the main actor, and exit may run on another thread.
func flushBufferedOutputAtExit() {
    guard fflush(nil) != 0 else { return }
    Terminal.error(Terminal.outputFailure(errno))
    _exit(Exit.outputFailed.rawValue)
}

extension ProgressText {
    /// The status line for a terminal `columns` wide: its fields shortened
    /// or dropped, the least useful first, until it fits (see `fitted`);
    /// only a terminal too narrow for the item count alone gets it cut.
    static func fittedStatus(_ progress: RunProgress, columns: Int?) -> String {
        guard let columns else { return status(progress) }
        let line = StatusField.shortened(statusFields(progress)) { DisplayText.displayWidth($0) <= columns - 3 }
        return fitted(line, columns: columns)
    }

    /// `line` cut to fit a terminal `columns` wide, with three columns to
    /// spare: a status line that wraps leaves its first row behind on every
    /// redraw (`\r` and erase-line reach only the last row), and so does one
    /// that the `^C` a terminal echoes on Ctrl-C pushes over the edge. Nil
    /// columns (unknown width) leaves it whole; a terminal too narrow for
    /// anything gets nothing.
    static func fitted(_ line: String, columns: Int?) -> String {
        guard let columns else { return line }
        let room = columns - 3
        guard DisplayText.displayWidth(line) > room else { return line }
        return room >= 2 ? DisplayText.elidingEnd(line, toWidth: room) : ""
    }
}

/// The status line on stderr: drawn in place, cleared before other output,
/// and drawn again below a line written above it. One for the process,
/// behind a lock: notes come from other threads than the printer's.
final class StatusLine: Sendable {
    static let shared = StatusLine()
    /// The text on the line now, nil when none is drawn.
    private let shown = Mutex<String?>(nil)
    /// Whether stderr erases a line on `ESC [ K` (a terminal, not `TERM=dumb`).
    /// Elsewhere (`--progress bar` into a file, a pipe or a dumb terminal) a
    /// shorter line is padded with blanks over the longer one instead: no
    /// escape sequence ends up in a log, where `less` showed `ESC[K` on every
    /// line, as curl's own progress meter writes none.
    private let canErase = Terminal.showsStatusLine

    /// Draws `text` in place of the line shown; the same text again is not
    /// written (the job's heartbeat repeats unchanged progress once a
    /// second, which into a log would be a line a second for a whole stall).
    func draw(_ text: String) {
        shown.withLock { shown in
            guard text != shown else { return }
            Terminal.writeErr(erasing(shown) + text)
            shown = text
        }
    }

    /// Erases the line shown, if any.
    func clear() {
        shown.withLock { shown in
            if shown != nil { Terminal.writeErr(erasing(shown)) }
            shown = nil
        }
    }

    /// Writes `lines` (ending in a newline) where the status line is, and the
    /// status line again below them.
    func writeAbove(_ lines: String) {
        shown.withLock { shown in
            Terminal.writeErr(erasing(shown) + lines + (shown ?? ""))
        }
    }

    private func erasing(_ shown: String?) -> String {
        guard let shown else { return "" }
        if canErase { return "\r\u{1B}[K" }
        return "\r" + String(repeating: " ", count: DisplayText.displayWidth(shown)) + "\r"
    }
}

/// Shows job events as the chosen progress mode asks, and the summary.
struct ProgressPrinter {
    let mode: ProgressMode

    /// Consumes the job's events until `.finished`.
    func consume(_ events: AsyncStream<JobEvent>) async {
        let live = mode.showsStatusLine
        var pausedHosts: Set<String> = []
        var explainedGiveUps: Set<String> = []
        // Notes of hosts paused, held until a progress shows items left: a
        // lone URL answered 429 under --retries 0 has failed already, and
        // "its URLs wait 1 s" was said of none.
        var heldNotes: [String] = []
        func showStatus(_ progress: RunProgress) {
            StatusLine.shared.draw(ProgressText.fittedStatus(progress, columns: Terminal.stderrColumns))
        }
        for await event in events {
            if mode == .json {
                // Every line a JSON object, failures included (they carry the URL and the reason).
                Terminal.writeErr(ProgressJSON.line(for: event) + "\n")
                continue
            }
            if case .progress(let progress) = event, !heldNotes.isEmpty,
               progress.done + progress.failed + progress.skipped < progress.total {
                for note in heldNotes { Terminal.notice(note, progress: mode) }
                heldNotes = []
            }
            switch event {
            case .progress(let progress) where live:
                showStatus(progress)
            case .failed(let url, let reason, let givenUpHost):
                // The status line shown is from before the failure (the item
                // may be in it as waiting to retry): it goes, and the next
                // progress, due within a second, draws it again.
                if live { StatusLine.shared.clear() }
                // A host given up is explained once: its 20,000 URLs wrote the
                // three rows of it 20,000 times (5 MB of stderr). Once for each
                // give-up: given up again, or for another reason, it says so again.
                let shown = RedactedURL.readable(url)
                if let givenUpHost, !explainedGiveUps.insert(reason).inserted {
                    Terminal.error("failed \(shown): its host, \(givenUpHost), is given up (as above)")
                } else {
                    Terminal.error("failed \(shown): \(reason)")
                }
            case .hostLimited(let host, let connections):
                Terminal.notice(ProgressText.hostLimitedNote(host: host, connections: connections), progress: mode)
            case .hostPaused(let host, let seconds):
                // Once a host: a host that keeps a pace pauses it again and again.
                if pausedHosts.insert(host).inserted { heldNotes.append(ProgressText.hostPausedNote(host: host, seconds: seconds)) }
            case .finished(let report):
                StatusLine.shared.clear()
                if mode != .none { Terminal.writeErr(ProgressText.summary(report) + "\n") }
            default:
                break
            }
        }
        StatusLine.shared.clear()
    }
}
