// SPDX-License-Identifier: GPL-2.0-or-later

/// Why a broker could not be published to, matched by ``code``; the text names the broker.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The broker answered and refused this client (user name, password, client id, protocol).
        case refused
        /// The TLS handshake failed: the certificate does not chain to `--publish-ca`, names another
        /// host, or the client certificate was refused.
        case tls
        /// No connection: the host does not resolve, nothing listens on the port, no route.
        case unreachable
        /// An established connection broke (the broker stopped, the network went).
        case connectionLost
        /// The broker did not answer in time.
        case timeout
        /// The peer does not speak MQTT as expected (not a broker, or TLS against a plain port).
        case protocolError
        /// The client library refused a call (bad options, a file it cannot read).
        case client
        /// The outbox could not be read (a damaged file, a failing disk): nothing to publish from.
        case outbox
    }

    public var code: Code
    /// `HOST:PORT`.
    public var broker: String
    public var detail: String

    public init(_ code: Code, broker: String, detail: String) {
        self.code = code
        self.broker = broker
        self.detail = detail
    }

    /// Errors that trying again does not cure (a wrong password, a wrong CA): a command says them at
    /// once instead of waiting.
    public var isPermanent: Bool { code == .refused || code == .tls || code == .protocolError || code == .client }

    public var description: String {
        switch code {
        case .refused: "MQTT broker \(broker) refused the connection: \(detail)"
        case .tls: "TLS with MQTT broker \(broker) failed: \(detail)"
        case .unreachable: "cannot reach MQTT broker \(broker): \(detail)"
        case .connectionLost: "connection to MQTT broker \(broker) lost: \(detail)"
        case .timeout: "MQTT broker \(broker) did not answer: \(detail)"
        case .protocolError: "\(broker) does not answer as an MQTT broker: \(detail)"
        case .client: "MQTT client for \(broker): \(detail)"
        case .outbox: "cannot read the outbox for MQTT broker \(broker): \(detail)"
        }
    }
}
