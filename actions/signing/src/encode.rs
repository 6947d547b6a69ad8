//! The encoders of docs/signing.md#s6-1, with their exact character sets.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but `A–Z a–z 0–9 - _ . ~` (unreserved) is encoded.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Azure's path-segment set: unreserved plus `$ & + : = @` stay as they are.
const PATH_SEGMENT: &AsciiSet = &UNRESERVED
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b':')
    .remove(b'=')
    .remove(b'@');

/// Q: query escape. Unreserved characters stay, a space becomes `+`, every other byte `%XX`.
pub fn query(text: &str) -> String {
    text.split(' ')
        .map(|part| utf8_percent_encode(part, UNRESERVED).to_string())
        .collect::<Vec<_>>()
        .join("+")
}

/// The SigV4 path encoder: Q on each `/`-separated segment, with spaces as `%20`.
pub fn sigv4_path(path: &str) -> String {
    path.split('/')
        .map(|segment| utf8_percent_encode(segment, UNRESERVED).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// P: Azure's path-segment escape.
pub fn path_segment(segment: &str) -> String {
    utf8_percent_encode(segment, PATH_SEGMENT).to_string()
}

/// A blob name with P applied to each `/`-separated segment.
pub fn blob_path(blob: &str) -> String {
    blob.split('/')
        .map(path_segment)
        .collect::<Vec<_>>()
        .join("/")
}

/// Keys sorted by byte order, joined as `Q(key)=Q(value)` with `&`.
pub fn sorted_query(params: &[(&str, &str)]) -> String {
    let mut params = params.to_vec();
    params.sort();
    params
        .iter()
        .map(|(k, v)| format!("{}={}", query(k), query(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigv4_path_examples_of_the_spec() {
        for (raw, encoded) in [
            ("/path/AZaz09-_.~", "/path/AZaz09-_.~"),
            ("/path/snap shot.db", "/path/snap%20shot.db"),
            (
                "/key$with&special+chars:here@now",
                "/key%24with%26special%2Bchars%3Ahere%40now",
            ),
            ("/path/file#1?v=2", "/path/file%231%3Fv%3D2"),
            ("/key=val;other", "/key%3Dval%3Bother"),
            ("/100%done", "/100%25done"),
            ("/datos/café.db", "/datos/caf%C3%A9.db"),
        ] {
            assert_eq!(sigv4_path(raw), encoded, "{raw}");
        }
    }

    #[test]
    fn query_escape_uses_plus_for_space() {
        assert_eq!(query("a b+c/d=é~"), "a+b%2Bc%2Fd%3D%C3%A9~");
    }

    #[test]
    fn azure_path_segments_keep_their_set() {
        assert_eq!(path_segment("a$&+:=@b"), "a$&+:=@b");
        assert_eq!(
            path_segment("a b/;,?#%!'()*"),
            "a%20b%2F%3B%2C%3F%23%25%21%27%28%29%2A"
        );
        assert_eq!(blob_path("dir/snap shot#1.db"), "dir/snap%20shot%231.db");
    }

    #[test]
    fn sorted_query_orders_by_bytes() {
        assert_eq!(
            sorted_query(&[("sv", "1"), ("se", "a:b"), ("X-Amz-Z", "z")]),
            "X-Amz-Z=z&se=a%3Ab&sv=1"
        );
    }
}
