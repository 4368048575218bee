import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// `reloadgate export --since` further back than what the ledger's retention kept says what the trace
/// cannot include; within what was kept it says nothing more.
@Suite(.heavy)
struct ExportRetentionTests {
    @Test func anExportFromBeforeWhatWasPrunedSaysSo() async throws {
        let directory = try TemporaryDirectory("export-retention")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", "com.example.scores"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")

        // Requests of three days ago and of now; the ledger pruned everything older than two days.
        let now = Timestamp(Date())
        let bound = now.adding(milliseconds: -2 * 86_400_000)
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let app = try #require(try await store.app(bundle: try BundleID("com.example.scores")))
            var batch = LedgerBatch()
            for (id, received) in [(1, now.adding(milliseconds: -3 * 86_400_000)), (2, now)] as [(RequestID, Timestamp)] {
                batch.requests.append(RecordedRequest(
                    id: id, app: app.id, source: .webhook, received: received, priority: .high,
                    expiration: nil, collapseID: nil, exempt: false, summary: #"{"kind":"scores"}"#
                ))
            }
            try await store.commit(batch)
            #expect(try await store.pruneLedger(LedgerPruneStep(receivedBefore: bound, now: now, limit: 100)).requests == 1)
        }

        let far = try await ReloadGateProcess.run(["export", "--since", "3d"], in: directory.url)
        #expect(far.status == 0, "\(far.stderr)")
        #expect(far.stderr.contains("reloadgate: requests received before \(bound.rfc3339) were pruned from the ledger (ledger.retention)"), "\(far.stderr)")
        let near = try await ReloadGateProcess.run(["export", "--since", "1d"], in: directory.url)
        #expect(near.status == 0, "\(near.stderr)")
        #expect(!near.stderr.contains("pruned"), "\(near.stderr)")
    }
}
