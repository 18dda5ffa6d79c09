import Testing
@Test func placeholder_GATTTests() { #expect(Bool(true)) }
