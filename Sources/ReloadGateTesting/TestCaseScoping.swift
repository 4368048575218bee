public import Testing

/// A trait that scopes each test case it applies to: applied to a suite, it reaches every test in it, and
/// the suite itself is given no scope of its own (``HeavyTest``, ``OffThePool``).
public protocol TestCaseScoping: SuiteTrait, TestTrait, TestScoping {}

extension TestCaseScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }
}
