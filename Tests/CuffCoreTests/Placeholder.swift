import Testing
@Test func placeholder_CuffCoreTests() { #expect(Bool(true)) }
