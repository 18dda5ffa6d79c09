// SPDX-License-Identifier: GPL-2.0-or-later

import CuffTestSupport
import Foundation
import Testing
import Transport

/// `cuff simulate` serving a fleet while clients misbehave: one that does not read what it asked
/// for, more clients than descriptors. The other cuffs go on serving, and the signals are heard.
@Suite("cuff simulate under load")
struct SimulatorUnderLoadTests {
    /// Starts `cuff simulate --listen unix:DIR/cuffs --cuffs N`; waits for the last socket.
    static func fleet(_ s: ScratchDirectory, cuffs: Int) throws -> ChildProcess {
        let child = try ChildProcess(
            ["simulate", "--listen", "unix:" + s.path("cuffs"), "--cuffs", "\(cuffs)"], stderr: s.path("sim.err"))
        let last = s.path("cuffs/cuff-" + String(format: "%04d", cuffs) + ".sock")
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: last) })
        return child
    }

    static func socket(_ s: ScratchDirectory, _ n: Int) -> String {
        s.path("cuffs/cuff-" + String(format: "%04d", n) + ".sock")
    }

    /// A Read Request of the Device Name (handle 0x0003) and its answer, within `seconds`.
    static func readAnswered(_ path: String, within seconds: Double) throws -> Bool {
        let bearer = try UnixSeqpacketBearer.connect(path: path)
        defer { bearer.close() }
        try bearer.send([0x0A, 0x03, 0x00])
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if case let .pdu(pdu) = try bearer.next(timeout: deadline - ContinuousClock.now), pdu.first == 0x0B {
                return true
            }
        }
        return false
    }

    /// A client of cuff `cuff` that sent Read Requests until its own socket was full (the cuff has
    /// stopped taking them), and how many went.
    static func floodedClient(_ s: ScratchDirectory, cuff: Int) throws -> (UnixSeqpacketBearer, Int) {
        let client = try UnixSeqpacketBearer.connect(path: socket(s, cuff))
        var sent = 0
        let filling = ContinuousClock.now
        while ContinuousClock.now - filling < .seconds(10) {
            if try client.sendNow([0x0A, 0x03, 0x00]) {
                sent += 1
            } else {
                usleep(20_000)  // the cuff may still be reading: full only when nothing more goes
                if try !client.sendNow([0x0A, 0x03, 0x00]) { break }
                sent += 1
            }
        }
        #expect(sent > 100, "\(sent)")
        return (client, sent)
    }

    /// A client that sends requests and never reads the answers: the cuff stops reading it once
    /// its socket is full, another cuff of the fleet answers at once, SIGTERM ends the simulator at
    /// once, and the client that does not read is dropped after 5 s.
    @Test func aClientThatDoesNotReadHoldsUpNoOne() throws {
        let s = try ScratchDirectory(prefix: "sim-slow")
        let sim = try Self.fleet(s, cuffs: 2)
        defer { sim.kill9() }
        let (slow, _) = try Self.floodedClient(s, cuff: 1)
        defer { slow.close() }
        #expect(try Self.readAnswered(Self.socket(s, 2), within: 2), "the other cuff answers meanwhile")
        #expect(
            waitUntil(10) { s.text("sim.err").contains("the client has not read for 5") }, "\(s.text("sim.err"))")
        #expect(try Self.readAnswered(Self.socket(s, 1), within: 2), "the first cuff serves its next client")
        sim.signal(SIGTERM)
        #expect(sim.wait(timeout: 3) == 0, "SIGTERM is heard at once")
    }

    /// A client that sends many requests without reading, then shuts down its writing
    /// (`shutdown(SHUT_WR)`) and reads: it gets an answer to every request, then the end.
    @Test func aHalfClosedClientStillGetsEveryAnswer() throws {
        let s = try ScratchDirectory(prefix: "sim-half")
        let sim = try Self.fleet(s, cuffs: 1)
        defer { sim.kill9() }
        let (client, sent) = try Self.floodedClient(s, cuff: 1)
        defer { client.close() }
        let fd = try #require(client.fileDescriptor)
        #expect(shutdown(fd, Int32(SHUT_WR)) == 0)
        var answers = 0
        var closed = false
        while !closed, case let event = try client.next(timeout: .seconds(3)) {
            switch event {
            case let .pdu(p): if p.first == 0x0B { answers += 1 }
            case .closed: closed = true
            case .timeout: closed = true
            }
        }
        #expect(answers == sent, "\(answers) of \(sent): \(s.text("sim.err").suffix(600))")
    }

    /// More clients than the simulator has descriptors for: accept fails with EMFILE. The
    /// simulator says so once per cuff, does not spin (the listener stays readable), and accepts
    /// again once clients leave.
    @Test func runningOutOfDescriptorsIsSaidOnceAndDoesNotSpin() throws {
        let s = try ScratchDirectory(prefix: "sim-emfile")
        let cuffs = 8
        let sim = try Self.fleet(s, cuffs: cuffs)
        defer { sim.kill9() }
        #expect(waitUntil(10) { s.text("sim.err").contains("listening at") }, "\(s.text("sim.err"))")
        // Room for two clients more: the limit bounds descriptor numbers, not how many are open,
        // so it is set just above the second free number.
        let limit = try Self.limitLeaving(2, free: sim.pid)
        let limited = try runToCompletion("prlimit", ["--pid", "\(sim.pid)", "--nofile=\(limit):\(limit)"])
        try #require(limited.status == 0, "prlimit (util-linux): \(limited.stderr)")
        let clients = try (1...cuffs).map { try UnixSeqpacketBearer.connect(path: Self.socket(s, $0)) }
        #expect(waitUntil(5) { s.text("sim.err").contains("accept failed") }, "\(s.text("sim.err"))")
        let before = Self.cpuSeconds(sim.pid)
        usleep(1_000_000)
        let used = Self.cpuSeconds(sim.pid) - before
        #expect(used < 0.3, "CPU seconds in one second while accept fails: \(used)")
        let failures = s.text("sim.err").components(separatedBy: "accept failed").count - 1
        #expect(failures >= 1 && failures <= cuffs - 2, "\(failures) lines: \(s.text("sim.err").suffix(2000))")
        for c in clients { c.close() }
        #expect(try Self.readAnswered(Self.socket(s, cuffs), within: 5), "accepting again")
        #expect(s.text("sim.err").contains("accepting again"))
        sim.signal(SIGTERM)
        #expect(sim.wait(timeout: 5) == 0)
    }

    /// The descriptor limit under which process `pid` has exactly `count` free descriptor numbers
    /// (a new descriptor takes the lowest free number; EMFILE once that reaches the limit).
    static func limitLeaving(_ count: Int, free pid: pid_t) throws -> Int {
        let open = Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").compactMap { Int($0) })
        var free = 0
        for n in 0... where !open.contains(n) {
            free += 1
            if free == count { return n + 1 }
        }
        return 0
    }

    /// User and system CPU time of a process, in seconds (`/proc/PID/stat`).
    static func cpuSeconds(_ pid: pid_t) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        // After "pid (comm) ", utime and stime are fields 14 and 15 (the 12th and 13th after comm).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let u = Double(fields[11]), let k = Double(fields[12]) else { return 0 }
        return (u + k) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
