//! Failures as gRPC statuses, the way Velero's Go framework reports them (docs/plugin-protocol.md#s12): `UNKNOWN` for
//! ordinary errors, `ABORTED` for a guest that panicked (Go: a recovered panic), `INVALID_ARGUMENT`
//! for a request Velero could never have sent. Velero does not branch on the code; the message is what
//! users see, as `rpc error: code = … desc = <message>`.

use tonic::{Code, Status};

use crate::action::ActionKind;
use crate::runtime::{CallError, Fault};

/// Longest status message sent (it travels in an HTTP/2 header, and Velero puts it in a log line).
pub(crate) const MAX_MESSAGE: usize = 16 << 10;

/// Longest text from a request (an action name, an operation id) quoted in a status message, in
/// characters: a client's text must not make the status too long for the client's header limits.
pub(crate) const MAX_QUOTED: usize = 256;

/// `text` as a status quotes it: cut to [`MAX_QUOTED`] characters, with an ellipsis and the full
/// length when cut.
pub(crate) fn quoted(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((end, _)) => format!("{}… ({} bytes in all)", &text[..end], text.len()).into(),
        None => text.into(),
    }
}

/// The status for a failed call of an action Velero asked for as `kind`.
pub(crate) fn call_failed(kind: ActionKind, error: &CallError) -> Status {
    match error {
        CallError::UnknownAction(name) => not_found(kind, name, "no loaded module provides it"),
        CallError::WrongKind {
            action,
            kind: actual,
            ..
        } => not_found(
            kind,
            action,
            &format!("it is a {} action", actual.velero_kind()),
        ),
        CallError::Action(message) => status(Code::Unknown, message),
        CallError::NoSigner => status(Code::Unknown, &error.to_string()),
        // A refused module's call fails its item, as an action's error does; the item's name comes
        // from the request: quoted, not copied whole.
        CallError::Refused {
            module,
            action,
            item,
            why,
        } => status(
            Code::Unknown,
            &format!(
                "module {module}, action {action}{}: refused: {why}",
                quoted(item)
            ),
        ),
        // The item's namespace and name come from the request: quoted, not copied whole.
        CallError::Fault {
            module,
            action,
            item,
            fault,
        } => {
            let code = match fault {
                Fault::Trap(_) => Code::Aborted,
                _ => Code::Unknown,
            };
            let message = format!("module {module}, action {action}{}: {fault}", quoted(item));
            status(code, &message)
        }
    }
}

/// A status whose message is cut to [`MAX_MESSAGE`] bytes.
fn status(code: Code, message: &str) -> Status {
    if message.len() <= MAX_MESSAGE {
        return Status::new(code, message);
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Status::new(
        code,
        format!("{}… ({} bytes in all)", &message[..end], message.len()),
    )
}

/// The status for a `plugin` name that names no action of `kind` (Go: `plugin: <name> was not found
/// or has an invalid name format`), with our reason.
pub(crate) fn not_found(kind: ActionKind, name: &str, reason: &str) -> Status {
    status(
        Code::Unknown,
        &format!(
            "{} plugin: {} was not found or has an invalid name format ({reason})",
            kind.velero_kind(),
            quoted(name)
        ),
    )
}

/// The status for an operation a v2 action started through Velero's v1 service, which cannot report
/// one (the action was v1 when Velero listed it).
pub(crate) fn untracked_operation(kind: ActionKind, name: &str, id: &str) -> Status {
    status(
        Code::Unknown,
        &format!(
            "{} started the asynchronous operation {}, but Velero knows it as a {} (v1) action, which cannot report one: restart Velero (its pod) so that it lists the action again",
            quoted(name),
            quoted(id),
            kind.velero_kind()
        ),
    )
}

/// The status of Progress or Cancel for an operation of a retired action.
pub(crate) fn retired_operation(name: &str) -> Status {
    status(
        Code::Unknown,
        &format!(
            "{}: no module provides this action any more, so its operation cannot be followed; put its module back in the module directory, or restart Velero to drop the action",
            quoted(name)
        ),
    )
}

/// The status for a malformed request field.
pub(crate) fn bad_request(field: &str, problem: impl std::fmt::Display) -> Status {
    status(Code::InvalidArgument, &format!("{field}: {problem}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn codes_follow_velero() {
        let s = call_failed(
            ActionKind::BackupV2,
            &CallError::UnknownAction("x.io/nope".into()),
        );
        assert_eq!(s.code(), Code::Unknown);
        assert_eq!(
            s.message(),
            "BackupItemActionV2 plugin: x.io/nope was not found or has an invalid name format (no loaded module provides it)"
        );
        let s = call_failed(
            ActionKind::Backup,
            &CallError::WrongKind {
                action: "x.io/r".into(),
                kind: ActionKind::Restore,
                call: "backup",
            },
        );
        assert!(
            s.message().contains("x.io/r was not found")
                && s.message().contains("it is a RestoreItemAction action")
        );
        let s = call_failed(ActionKind::Backup, &CallError::Action("no volume".into()));
        assert_eq!((s.code(), s.message()), (Code::Unknown, "no volume"));
        let trap = CallError::Fault {
            module: "m".into(),
            action: "x.io/a".into(),
            item: " on item pods ns/p".into(),
            fault: Fault::Trap(crate::runtime::Trapped::new("boom")),
        };
        let s = call_failed(ActionKind::Backup, &trap);
        assert_eq!(s.code(), Code::Aborted);
        assert_eq!(
            s.message(),
            "module m, action x.io/a on item pods ns/p: trapped: boom"
        );
        let timeout = CallError::Fault {
            module: "m".into(),
            action: "x.io/a".into(),
            item: String::new(),
            fault: Fault::Timeout(Duration::from_secs(2)),
        };
        assert_eq!(
            call_failed(ActionKind::Backup, &timeout).code(),
            Code::Unknown
        );
    }

    #[test]
    fn long_messages_are_cut() {
        let s = call_failed(ActionKind::Backup, &CallError::Action("é".repeat(20_000)));
        assert!(
            s.message().len() < MAX_MESSAGE + 40,
            "{}",
            s.message().len()
        );
        assert!(s.message().ends_with("… (40000 bytes in all)"));
    }

    #[test]
    fn names_from_the_request_are_quoted_at_most_256_characters() {
        let name = "é".repeat(1 << 20);
        let s = not_found(ActionKind::Backup, &name, "no loaded module provides it");
        assert!(s.message().starts_with(&format!(
            "BackupItemAction plugin: {}… (2097152 bytes in all) was not found",
            "é".repeat(MAX_QUOTED)
        )));
        assert!(s.message().len() < 1024, "{}", s.message().len());
        let s = untracked_operation(ActionKind::Backup, &name, &"1".repeat(300));
        assert!(s.message().len() < 1024, "{}", s.message().len());
        assert!(retired_operation(&name).message().len() < 1024);
        assert_eq!(quoted("x.io/short"), "x.io/short");
        assert_eq!(quoted(&"a".repeat(MAX_QUOTED)), "a".repeat(MAX_QUOTED));
    }
}
