import Testing
@Test func placeholder_BloodPressureTests() { #expect(Bool(true)) }
