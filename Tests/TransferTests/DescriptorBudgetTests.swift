import Foundation
import Testing
@testable import Transfer

@Suite struct DescriptorBudgetTests {
    /// Everything an engine may hold open at `jobs` transfers: with libcurl's
    /// cache of connections full, each running transfer may open one more,
    /// which the connections beyond two a transfer must leave room for.
    private func worstCase(_ budget: DescriptorBudget, jobs: Int) -> Int {
        let connections = budget.connections(jobs: jobs)
        return connections + (connections > 2 * jobs ? jobs : 0) + budget.batchWidth(jobs: jobs) + budget.retryWaiting(jobs: jobs)
            + budget.heldFinishedBodies + DescriptorBudget.reserved
    }

    @Test(arguments: [(256, 64, 0), (1024, 256, 0), (4096, 1024, 0), (65_536, 1024, 0), (1024, 256, 100), (4096, 1024, 500)])
    func everyAllowedJobCountFitsTheLimit(limit: Int, held: Int, inherited: Int) {
        let budget = DescriptorBudget(limit: limit, heldFinishedBodies: held, inherited: inherited)
        #expect(budget.maxJobs >= 16)
        for jobs in 1...budget.maxJobs {
            // The descriptors the process was started with are there all along.
            #expect(worstCase(budget, jobs: jobs) + inherited <= limit, "jobs \(jobs)")
            #expect(budget.batchWidth(jobs: jobs) >= 2 * jobs)
        }
    }

    /// Descriptors the process was started with count against the limit:
    /// fewer transfers, and a run refused when too few are left free.
    @Test func descriptorsTheProcessWasStartedWithCountAgainstTheLimit() {
        let clean = DescriptorBudget(limit: 256, heldFinishedBodies: 64)
        let inheriting = DescriptorBudget(limit: 256, heldFinishedBodies: 64, inherited: 100)
        #expect(inheriting.maxJobs < clean.maxJobs)
        #expect(inheriting.maxJobs == (256 - 100 - DescriptorBudget.reserved - 64) / 6)
        #expect(!DescriptorBudget(limit: 64, heldFinishedBodies: 16, inherited: 8).isTooLow)
        #expect(DescriptorBudget(limit: 64, heldFinishedBodies: 16, inherited: 9).isTooLow)
        #expect(DescriptorBudget(limit: 55, heldFinishedBodies: 16).isTooLow)
        #expect(!DescriptorBudget(limit: 56, heldFinishedBodies: 16).isTooLow)
        #expect(DescriptorBudget(limit: 64, heldFinishedBodies: 16, inherited: 20).leastLimitNeeded == 76)
        #expect(DescriptorBudget(limit: 40, heldFinishedBodies: 16).leastLimitNeeded == 56)
    }

    @Test func aRoomyLimitKeepsFourTimesTheJobsInFlight() {
        let budget = DescriptorBudget(limit: 65_536, heldFinishedBodies: 1024)
        #expect(budget.batchWidth(jobs: 16) == 64)
        #expect(budget.retryWaiting(jobs: 16) == 1024)
        // Not fewer at fewer jobs: 2,000 refused hosts went through their patience 128 at a time at --jobs 2
        #expect(budget.retryWaiting(jobs: 2) == 1024)
        #expect(budget.retryWaiting(jobs: 32) == 2048)
        #expect(budget.batchWidth(jobs: 200) == 800)
        // Connections kept for the hosts a list goes round, beyond two a transfer.
        #expect(budget.connections(jobs: 16) == 32 + 256)
        #expect(DescriptorBudget(limit: 1024, heldFinishedBodies: 256).connections(jobs: 16) == 32 + 256)
        #expect(DescriptorBudget(limit: 256, heldFinishedBodies: 64).connections(jobs: 16) >= 32)
    }

    @Test func aTightLimitCapsTheJobs() {
        // A desktop's 1024 with a quarter for finished bodies: (1024 - 64 - 256) / 6.
        #expect(DescriptorBudget(limit: 1024, heldFinishedBodies: 256).maxJobs == 117)
        #expect(DescriptorBudget(limit: 256, heldFinishedBodies: 64).maxJobs == 21)
    }
}

/// The descriptor table is grown once at start-up (see `TransferEngine.reserveDescriptorTable`).
@Suite struct DescriptorTableTests {
    /// The table's size as the kernel reports it (`FDSize` in /proc/self/status).
    private func tableSize() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("FDSize:") })
        return try #require(Int(line.dropFirst("FDSize:".count).trimmingCharacters(in: .whitespaces)))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/status")))
    func theTableIsGrownToTheReserveAndNothingIsLeftOpen() throws {
        let wanted = min(TransferEngine.descriptorTableReserve, TransferConfiguration.descriptorLimit())
        TransferEngine.reserveDescriptorTable()
        #expect(try tableSize() >= wanted)
        // The descriptor that grew it is closed again.
        #expect(fcntl(Int32(wanted - 1), F_GETFD) == -1)
    }
}

@Suite struct AddressSpaceTests {
    /// What a run needs under an address-space limit, and how it is said:
    /// the `--jobs` typed (with what the open files hold it to), and a long
    /// list's bytes, counted twice from 1 MiB on.
    @Test func theNeedCountsTheJobsAndTheListAndNamesWhatWasTyped() {
        #expect(AddressSpace.needed(jobs: 16) == 288 << 20)
        #expect(AddressSpace.needed(jobs: 16, listBytes: 1_000) == 288 << 20)
        #expect(AddressSpace.needed(jobs: 16, listBytes: 50 << 20) == 388 << 20)
        #expect(AddressSpace.problem(jobs: 16, limit: 300 << 20) == nil)
        #expect(AddressSpace.problem(jobs: 16, limit: nil) == nil)
        let capped = AddressSpace.problem(jobs: 3_152, asked: 100_000, limit: 300 << 20)
        #expect(capped?.contains("needs about 11264 MiB with --jobs 100000 (3152 at once, as many as the open files allow): ") == true,
                "\(capped ?? "")")
        let typed = AddressSpace.problem(jobs: 100, asked: 100, limit: 300 << 20)
        #expect(typed?.contains("needs about 582 MiB with --jobs 100: ") == true, "\(typed ?? "")")
        let list = AddressSpace.problem(jobs: 16, listBytes: 50 << 20, limit: 300 << 20)
        #expect(list?.contains("needs about 388 MiB for a list of 50 MiB: ") == true, "\(list ?? "")")
    }
}
