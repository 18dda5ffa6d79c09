import Testing
@Test func placeholder_TransportTests() { #expect(Bool(true)) }
