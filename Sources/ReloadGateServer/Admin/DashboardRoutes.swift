import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ReloadGateAPI
import ReloadGateCore
import ReloadGateStore

/// The dashboard: a page served by the admin API (`GET /dashboard`, with its script and style
/// sheet, all compiled into the binary: no CDN, no external fonts) and the figures it shows
/// (`GET /v1/dashboard`), refreshed by the page every few seconds. People open it through
/// `reloadgate dashboard`, a loopback proxy that holds the admin API behind a token.
struct DashboardRoutes {
    let door: GatewayDoor

    /// Instances listed as closest to an empty budget.
    static let lowestBudgets = 10
    /// Pending reloads listed (soonest due first).
    static let pendingListed = 100

    func register(on router: some RouterMethods) {
        router.get("/dashboard") { _, _ in Self.asset(PackageResources.dashboard_html, type: "text/html; charset=utf-8") }
        router.get("/dashboard/app.js") { _, _ in Self.asset(PackageResources.dashboard_js, type: "text/javascript; charset=utf-8") }
        router.get("/dashboard/app.css") { _, _ in Self.asset(PackageResources.dashboard_css, type: "text/css; charset=utf-8") }
        router.get("/v1/dashboard") { request, _ in try await figures(request) }
    }

    /// A file of the page, with a policy that lets it load nothing from anywhere else.
    static func asset(_ bytes: [UInt8], type: String) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: type,
                .contentSecurityPolicy: "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
                .xContentTypeOptions: "nosniff",
                .cacheControl: "no-store",
            ],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    private func figures(_ request: Request) async throws -> Response {
        let bundle = try AdminRoutes.bundleFilter(request.uri.queryParameters["bundle"])
        let time = Timestamp(door.now())
        let figures = try await door.reader.dashboardFigures(bundle: bundle, now: time)
        let pending = try await door.reader.pendingReloads(PendingFilter(bundle: bundle, limit: Self.pendingListed))
        let budgets = await door.budgetUse(lowest: Self.lowestBudgets)
        let names = Dictionary(
            uniqueKeysWithValues: try await door.reader.instanceDescriptions(budgets.lowest.map { Int64($0.instance.rawValue) }).map { ($0.instance, $0) }
        )
        let hour = DashboardFigures.hour
        let currentHour = time.milliseconds / hour * hour
        var decisions: [String: Int] = [:]
        for kind in DecisionKind.allCases { decisions[kind.rawValue] = figures.decisionsByKind[kind.rawValue] ?? 0 }
        var deliveries: [String: Int] = [:]
        for state in ["pending", "sending", "sent", "failed"] { deliveries[state] = figures.deliveriesByState[state] ?? 0 }
        typealias Figures = AdminAPI.DashboardFigures
        return try AdminRoutes.json(Figures(
            now: time.rfc3339,
            bundle: bundle,
            bundles: figures.bundles,
            decisions: decisions,
            decisionsByHour: figures.decisionsByHour.enumerated().map { index, counts in
                Figures.HourDecisions(hour: Timestamp(milliseconds: currentHour - Int64(23 - index) * hour).rfc3339, decisions: counts)
            },
            deliveries: deliveries,
            failures: figures.failuresByReason,
            deliveryQueue: deliveries["pending", default: 0] + deliveries["sending", default: 0],
            oldestOpenDelivery: figures.oldestOpenDelivery?.rfc3339,
            retries: figures.retries,
            unknownOutcomes: figures.unknownOutcomes,
            pendingReloads: figures.pendingReloads,
            pendingDueNow: figures.pendingDueNow,
            pendingByHour: figures.pendingByHour.enumerated().map { index, count in
                Figures.HourCount(from: Timestamp(milliseconds: time.milliseconds + Int64(index) * hour).rfc3339, count: count)
            },
            pendingLater: figures.pendingLater,
            pending: pending.map { row in
                Figures.DashboardPending(
                    instance: row.instance, bundle: row.bundle, device: row.deviceToken, widget: row.widgetID, kind: row.kind,
                    pushType: PushTypeDescriptor.of(family: row.family).pushType.rawValue,
                    due: row.due.rfc3339, priority: row.priority, requestCount: row.requestCount
                )
            },
            budgets: Figures.Budgets(
                // On a shared store, the instances of this gateway's partitions (budgets live in its scheduler).
                scope: door.partitioning == nil ? "all" : "this gateway's partitions",
                policies: budgets.policies.map { policy in
                    Figures.Policy(
                        pushType: policy.pushType.rawValue, kind: policy.kind, burst: policy.burst, dailyBudget: policy.dailyBudget,
                        instances: policy.instances, tokens: policy.tokens, empty: policy.empty
                    )
                },
                lowest: budgets.lowest.map { entry in
                    let name = names[Int64(entry.instance.rawValue)]
                    return Figures.Lowest(
                        instance: Int64(entry.instance.rawValue), bundle: name?.bundle, device: name?.token, widget: name?.widgetID,
                        kind: name?.kind, pushType: entry.pushType.rawValue, tokens: entry.tokens, burst: entry.burst,
                        nextToken: entry.nextToken?.rfc3339
                    )
                }
            ),
            unregistered: Figures.Unregistered(
                count: figures.unregisteredDevices,
                recent: figures.recentlyUnregistered.map { .init(bundle: $0.bundle, device: $0.token, since: $0.since.rfc3339) }
            ),
            pushTypes: Dictionary(uniqueKeysWithValues: PushType.allCases.map { type in
                (type.rawValue, Figures.PushTypeNames(label: type.descriptor.label, plural: type.descriptor.pluralLabel, kindPrefix: type.descriptor.kindPrefix))
            })
        ))
    }
}

extension HTTPField.Name {
    static let contentSecurityPolicy = Self("content-security-policy")!
    static let xContentTypeOptions = Self("x-content-type-options")!
}
