import Testing
@Test func placeholder_CuffSessionTests() { #expect(Bool(true)) }
