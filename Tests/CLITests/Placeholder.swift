import Testing
@Test func placeholder_CLITests() { #expect(Bool(true)) }
