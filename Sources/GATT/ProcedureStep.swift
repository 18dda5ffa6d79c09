// SPDX-License-Identifier: GPL-2.0-or-later

/// What a client procedure does next: send a request, or finish.
enum ProcedureStep: Sendable {
    case send(ATTPDU)
    case done(Result<GATTClientResponse, GATTClientError>)
}
