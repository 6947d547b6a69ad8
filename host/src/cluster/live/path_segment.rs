//! The names a guest puts in a request's path, checked to stay one segment of it.

use crate::cluster::vocabulary::KubeError;

/// A path segment from the guest (name, namespace, group, version, resource): non-empty, not `.` or
/// `..`, printable ASCII without `/ ? # %`, so a request can never address another path.
pub(super) fn segment<'a>(what: &str, value: &'a str) -> Result<&'a str, KubeError> {
    let ok = !value.is_empty()
        && value != "."
        && value != ".."
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"/?#%\\\"<>^`{|}".contains(&b));
    if ok {
        Ok(value)
    } else {
        Err(KubeError::Invalid(format!(
            "{what} {value:?} is not a valid name"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_names_cannot_leave_their_path_segment() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "x?watch=true",
            "a%2Fb",
            "a#b",
            "a b",
            "é",
        ] {
            assert!(
                matches!(segment("name", bad), Err(KubeError::Invalid(_))),
                "{bad:?}"
            );
        }
        for good in ["web-0", "system:controller:x", "a.b.c", "v1beta1"] {
            assert_eq!(segment("name", good).unwrap(), good);
        }
    }
}
