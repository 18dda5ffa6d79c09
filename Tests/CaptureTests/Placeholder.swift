import Testing
@Test func placeholder_CaptureTests() { #expect(Bool(true)) }
