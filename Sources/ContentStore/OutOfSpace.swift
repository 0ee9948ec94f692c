import Foundation
import GRDB

/// Whether an error of the store or the catalog means that the disk holding
/// the cache is full: a run stops on it instead of failing every item left.
public enum OutOfSpace {
    /// True for ENOSPC and EDQUOT from the store and `SQLITE_FULL` from the catalog.
    public static func isCause(of error: any Error) -> Bool {
        switch error {
        case let error as StoreError: error.code.map(isSystemCode) ?? false
        case let error as DatabaseError: error.resultCode == .SQLITE_FULL
        default: false
        }
    }

    /// True for the system's error numbers of a full disk: no space left, or the user's quota spent.
    public static func isSystemCode(_ code: Int32) -> Bool {
        code == ENOSPC || code == EDQUOT
    }
}
