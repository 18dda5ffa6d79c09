import Testing
@Test func placeholder_SinksTests() { #expect(Bool(true)) }
