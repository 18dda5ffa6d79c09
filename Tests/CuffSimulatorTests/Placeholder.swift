import Testing
@Test func placeholder_CuffSimulatorTests() { #expect(Bool(true)) }
