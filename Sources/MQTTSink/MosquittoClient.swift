// SPDX-License-Identifier: GPL-2.0-or-later
import CMosquitto
import Foundation

/// One connection attempt's libmosquitto client, driven by its caller's event loop: ``socket``,
/// ``wantsWrite``, ``read()``, ``write()`` and ``misc()`` (never `mosquitto_loop_start`'s thread).
///
/// Made new for every attempt, so nothing libmosquitto queued for an earlier connection is sent
/// again behind the outbox's back. Not thread-safe: one thread uses it.
final class MosquittoClient {
    /// TLS material for `mqtts://`.
    struct TLS: Sendable, Hashable {
        /// The trusted roots (nil: the system's, `/etc/ssl/certs`).
        var caFile: String?
        var certFile: String?
        var keyFile: String?
    }

    /// What the broker said, through libmosquitto's callbacks (read after each call).
    enum Event {
        case connected
        case refused(code: Int32, reason: String)
        case published(mid: Int32)
        case disconnected(code: Int32)
        /// A SUBACK: whether the broker granted the subscription (not 0x80).
        case subscribed(mid: Int32, granted: Bool)
        /// A message on a subscribed topic (retained ones included).
        case message(topic: String, payload: [UInt8])
    }

    private let handle: OpaquePointer
    let broker: String
    /// Events since the caller last took them.
    var events: [Event] = []
    /// The last error libmosquitto logged (OpenSSL's reason for a failed handshake).
    var lastLoggedError: String?

    private static let initialized: Bool = {
        mosquitto_lib_init()
        return true
    }()

    /// A client with `id`, its will (retained, QoS 1) and credentials; does not connect yet.
    init(id: String, url: MQTTURL, tls: TLS?, will: (topic: String, payload: String)?) throws(MQTTError) {
        _ = Self.initialized
        broker = url.serverName
        guard let h = mosquitto_new(id, true, nil) else {
            throw MQTTError(.client, broker: url.serverName, detail: "mosquitto_new failed")
        }
        handle = h
        mosquitto_user_data_set(h, Unmanaged.passUnretained(self).toOpaque())
        mosquitto_connect_callback_set(h) { _, obj, rc in
            let me = Unmanaged<MosquittoClient>.fromOpaque(obj!).takeUnretainedValue()
            me.events.append(
                rc == 0 ? .connected : .refused(code: rc, reason: String(cString: mosquitto_connack_string(rc))))
        }
        mosquitto_publish_callback_set(h) { _, obj, mid in
            Unmanaged<MosquittoClient>.fromOpaque(obj!).takeUnretainedValue().events.append(.published(mid: mid))
        }
        mosquitto_subscribe_callback_set(h) { _, obj, mid, count, granted in
            var ok = count > 0 && granted != nil
            if let g = granted { for i in 0..<Int(max(0, count)) where g[i] == 0x80 { ok = false } }
            Unmanaged<MosquittoClient>.fromOpaque(obj!).takeUnretainedValue().events.append(
                .subscribed(mid: mid, granted: ok))
        }
        mosquitto_message_callback_set(h) { _, obj, message in
            guard let m = message?.pointee, let topic = m.topic else { return }
            let payload: [UInt8] =
                m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(max(0, m.payloadlen)))) } ?? []
            Unmanaged<MosquittoClient>.fromOpaque(obj!).takeUnretainedValue().events.append(
                .message(topic: String(cString: topic), payload: payload))
        }
        mosquitto_disconnect_callback_set(h) { _, obj, rc in
            Unmanaged<MosquittoClient>.fromOpaque(obj!).takeUnretainedValue().events.append(.disconnected(code: rc))
        }
        mosquitto_log_callback_set(h) { _, obj, level, text in
            guard level & MOSQ_LOG_ERR != 0, let text else { return }
            Unmanaged<MosquittoClient>.fromOpaque(obj!).takeUnretainedValue().lastLoggedError = String(cString: text)
        }
        try check(mosquitto_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311), "protocol version")
        if let user = url.user { try check(mosquitto_username_pw_set(h, user, url.password), "user name") }
        if let will {
            try check(
                mosquitto_will_set(h, will.topic, Int32(will.payload.utf8.count), will.payload, 1, true),
                "last will")
        }
        if let tls {
            let capath: String? = tls.caFile == nil ? "/etc/ssl/certs" : nil
            let rc = mosquitto_tls_set(h, tls.caFile, capath, tls.certFile, tls.keyFile, nil)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                throw MQTTError(
                    .client, broker: broker,
                    detail: "TLS files (--publish-ca, --publish-cert, --publish-key): \(Self.describe(rc))")
            }
        }
        // Nothing to undo on a throw above: every stored property is set by then, so the throw
        // runs `deinit`, which destroys the handle (a second `mosquitto_destroy` here once freed it
        // twice, and closed whatever descriptors reused its sockets' numbers).
    }

    deinit { mosquitto_destroy(handle) }

    private func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError(.client, broker: broker, detail: "\(what): \(Self.describe(rc))")
        }
    }

    /// Starts a non-blocking connection (the CONNECT packet waits until the socket is writable).
    func connect(host: String, port: Int, keepalive: Int32) throws(MQTTError) {
        let rc = mosquitto_connect_async(handle, host, Int32(port), keepalive)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw failure(rc) }
    }

    /// The socket to watch; nil when there is none (not connected, or closed).
    var socket: CInt? {
        let fd = mosquitto_socket(handle)
        return fd < 0 ? nil : fd
    }

    var wantsWrite: Bool { mosquitto_want_write(handle) }

    func read() throws(MQTTError) { try step(mosquitto_loop_read(handle, 1)) }
    func write() throws(MQTTError) { try step(mosquitto_loop_write(handle, 1)) }
    /// Keep-alive pings and their timeouts; call about once a second.
    func misc() throws(MQTTError) { try step(mosquitto_loop_misc(handle)) }

    private func step(_ rc: Int32) throws(MQTTError) {
        guard rc != MOSQ_ERR_SUCCESS.rawValue else { return }
        throw failure(rc)
    }

    /// Queues a message; returns its message id (its PUBACK arrives as ``Event/published(mid:)``).
    func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { b in
            mosquitto_publish(handle, &mid, topic, Int32(b.count), b.baseAddress, qos, retain)
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw failure(rc) }
        return mid
    }

    /// Queues a SUBSCRIBE; returns its message id (its SUBACK arrives as ``Event/subscribed(mid:granted:)``).
    func subscribe(_ pattern: String, qos: Int32 = 1) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc = mosquitto_subscribe(handle, &mid, pattern, qos)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw failure(rc) }
        return mid
    }

    /// Queues an UNSUBSCRIBE.
    func unsubscribe(_ pattern: String) { _ = mosquitto_unsubscribe(handle, nil, pattern) }

    /// Queues a DISCONNECT (the will is not sent).
    func disconnect() { _ = mosquitto_disconnect(handle) }

    /// A library result as an ``MQTTError`` of the right code.
    func failure(_ rc: Int32) -> MQTTError {
        let errnoText = String(cString: strerror(errno))
        switch rc {
        case MOSQ_ERR_CONN_REFUSED.rawValue, MOSQ_ERR_AUTH.rawValue:
            if let reason = events.lazy.compactMap({ if case let .refused(_, r) = $0 { r } else { nil } }).first {
                // libmosquitto's "Connection Refused: not authorised." → "not authorised".
                var r = reason.lowercased()
                if r.hasPrefix("connection refused: ") { r.removeFirst("connection refused: ".count) }
                if r.hasSuffix(".") { r.removeLast() }
                return MQTTError(
                    .refused, broker: broker,
                    detail: r + (r.contains("authori") ? " (check the user name and password)" : ""))
            }
            return MQTTError(.refused, broker: broker, detail: Self.describe(rc))
        case MOSQ_ERR_TLS.rawValue, MOSQ_ERR_TLS_HANDSHAKE.rawValue:
            return MQTTError(.tls, broker: broker, detail: lastLoggedError.map(Self.openSSLReason) ?? Self.describe(rc))
        case MOSQ_ERR_ERRNO.rawValue where errno == 0:
            // libmosquitto's "end of file in the middle of a packet" (its errno untouched, so
            // strerror said "Success"): what answered spoke something else (an HTTP server's 400).
            return MQTTError(
                .protocolError, broker: broker,
                detail: "the connection ended in the middle of an MQTT packet (is it an MQTT broker's port?)")
        case MOSQ_ERR_ERRNO.rawValue:
            return MQTTError(
                errno == ECONNRESET || errno == EPIPE ? .connectionLost : .unreachable, broker: broker,
                detail: errnoText)
        case MOSQ_ERR_EAI.rawValue, MOSQ_ERR_LOOKUP.rawValue:
            return MQTTError(.unreachable, broker: broker, detail: "the host name does not resolve")
        case MOSQ_ERR_NO_CONN.rawValue, MOSQ_ERR_CONN_LOST.rawValue:
            return MQTTError(.connectionLost, broker: broker, detail: Self.describe(rc))
        case MOSQ_ERR_PROTOCOL.rawValue, MOSQ_ERR_MALFORMED_PACKET.rawValue:
            return MQTTError(
                .protocolError, broker: broker,
                detail: "\(Self.describe(rc)) (is it an MQTT broker, and mqtts:// for its TLS port?)")
        case MOSQ_ERR_KEEPALIVE.rawValue:
            return MQTTError(.timeout, broker: broker, detail: "no answer to keep-alive pings")
        default:
            return MQTTError(.client, broker: broker, detail: Self.describe(rc))
        }
    }

    static func describe(_ rc: Int32) -> String { String(cString: mosquitto_strerror(rc)) }

    /// `OpenSSL Error[0]: error:0A000086:SSL routines::certificate verify failed` → `certificate verify failed`.
    static func openSSLReason(_ log: String) -> String {
        if let r = log.range(of: "::", options: .backwards) { return String(log[r.upperBound...]) }
        return log
    }
}
