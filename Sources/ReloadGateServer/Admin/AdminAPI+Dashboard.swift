public import ReloadGateAPI

extension AdminAPI {
    /// `GET /v1/dashboard`: what the dashboard's page shows, refreshed every few seconds.
    public struct DashboardFigures: DocumentedBody {
        public static let schema = "DashboardFigures"
        public var now: String
        /// The app the figures are limited to, or `null` for all.
        @Nullable public var bundle: String?
        public var bundles: [String]
        public var decisions: [String: Int]
        /// The last 24 hours, oldest first.
        public var decisionsByHour: [HourDecisions]
        public var deliveries: [String: Int]
        public var failures: [String: Int]
        public var deliveryQueue: Int
        @Nullable public var oldestOpenDelivery: String?
        public var retries: Int
        public var unknownOutcomes: Int
        public var pendingReloads: Int
        public var pendingDueNow: Int
        /// The next 24 hours.
        public var pendingByHour: [HourCount]
        public var pendingLater: Int
        public var pending: [DashboardPending]
        public var budgets: Budgets
        public var unregistered: Unregistered
        /// How the page names each push type (by `apns-push-type`) and its kinds.
        public var pushTypes: [String: PushTypeNames]

        public struct PushTypeNames: Codable, Sendable, Hashable {
            /// One instance's name: `widget`, `control`.
            public var label: String
            /// Several instances' name: `widgets`, `controls`, `activities`.
            public var plural: String
            /// Put before a kind where kinds of several types are listed together (`control:`), or empty.
            public var kindPrefix: String
        }

        public struct HourDecisions: Codable, Sendable, Hashable {
            public var hour: String
            public var decisions: [String: Int]
        }

        public struct HourCount: Codable, Sendable, Hashable {
            public var from: String
            public var count: Int
        }

        public struct DashboardPending: Codable, Sendable, Hashable {
            public var instance: Int64
            public var bundle: String
            public var device: String
            public var widget: String
            public var kind: String
            public var pushType: String
            public var due: String
            public var priority: Int
            public var requestCount: Int
        }

        public struct Budgets: Codable, Sendable, Hashable {
            /// `all`, or `this gateway's partitions` on a shared store.
            public var scope: String
            public var policies: [Policy]
            public var lowest: [Lowest]
        }

        /// The use of one budget policy.
        public struct Policy: Codable, Sendable, Hashable {
            public var pushType: String
            @Nullable public var kind: String?
            public var burst: Int
            public var dailyBudget: Int
            public var instances: Int
            public var tokens: Int
            public var empty: Int
        }

        /// An instance among those closest to an empty budget.
        public struct Lowest: Codable, Sendable, Hashable {
            public var instance: Int64
            @Nullable public var bundle: String?
            @Nullable public var device: String?
            @Nullable public var widget: String?
            @Nullable public var kind: String?
            public var pushType: String
            public var tokens: Int
            public var burst: Int
            @Nullable public var nextToken: String?
        }

        public struct Unregistered: Codable, Sendable, Hashable {
            public var count: Int
            public var recent: [Device]

            public struct Device: Codable, Sendable, Hashable {
                public var bundle: String
                public var device: String
                public var since: String
            }
        }
    }
}
