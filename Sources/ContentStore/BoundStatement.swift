import CSQLiteTuning
import GRDB

/// A value for one parameter of a statement run by `Statement.run(_:)`.
enum BoundValue {
    case text(String?)
    case integer(Int64)
    case real(Double)

    static func flag(_ value: Bool) -> BoundValue { .integer(value ? 1 : 0) }
}

extension Statement {
    /// Runs this statement, prepared by GRDB, with `values` bound to its
    /// parameters in order through SQLite's C API. GRDB's arguments box
    /// every value as an existential: for the three rows the catalog writes
    /// for every body, that cost as much CPU as SQLite's own work. Failures
    /// are GRDB's `DatabaseError`, with SQLite's result code and message.
    ///
    /// GRDB's bookkeeping around a statement is skipped: use it only inside
    /// a write transaction with no transaction observers, and let an error
    /// it throws end the transaction (a failed step may have rolled it back,
    /// and rows after it would then be committed one by one).
    func run(_ values: BoundValue...) throws {
        let handle = UnsafeMutableRawPointer(sqliteStatement)
        // A value missing or too many would leave a parameter bound to the
        // previous row's value (bindings outlive a reset): refused, as GRDB refuses it.
        let expected = Int(mf_sqlite_parameter_count(handle))
        guard values.count == expected else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE,
                                message: "wrong number of statement arguments: \(values.count), expected \(expected)", sql: sql)
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .text(nil): code = mf_sqlite_bind_text(handle, index, nil)
            // Read up to a NUL, as GRDB binds and reads text back.
            case .text(let text?): code = text.withCString { mf_sqlite_bind_text(handle, index, $0) }
            case .integer(let number): code = mf_sqlite_bind_int64(handle, index, number)
            case .real(let number): code = mf_sqlite_bind_double(handle, index, number)
            }
            guard code == 0 else { throw failure(code, handle) }
        }
        let code = mf_sqlite_run(handle)
        guard code == 101 else { throw failure(code, handle) } // SQLITE_DONE
    }

    private func failure(_ code: Int32, _ handle: UnsafeMutableRawPointer) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: mf_sqlite_error_message(handle)), sql: sql)
    }
}
