import CFileSync

/// The standard descriptors the program was started without (see
/// `mf_standard_descriptor_was_closed`): each reads or writes /dev/null
/// since, and what needs one says it was closed.
public enum StandardDescriptors {
    /// Whether `fd` (0, 1 or 2) was closed when the program started.
    public static func wasClosed(_ fd: Int32) -> Bool {
        mf_standard_descriptor_was_closed(fd) != 0
    }
}
